"""Provider webhooks, from Python: set by the harness at open_trial or
set_webhooks, with the trial's own verification material in its bundle."""

from __future__ import annotations

import base64

import pytest

from mailplane import Refused, Stack


def test_open_trial_with_webhooks(stack: Stack) -> None:
    hooks = [
        {"provider": "resend", "url": "http://127.0.0.1:9/resend", "retry_seconds": [1, 5]},
        {"provider": "postmark", "url": "http://hookuser:hookpass@127.0.0.1:9/postmark"},
    ]
    with stack.open_trial(webhooks=hooks) as t, stack.open_trial() as other:
        p, env = t.providers, t.candidate_environment
        assert p["resend"]["webhook_secret"].startswith("whsec_")
        assert len(base64.b64decode(p["resend"]["webhook_secret"][len("whsec_") :])) == 32
        assert len(base64.b64decode(p["sendgrid"]["webhook_public_key"])) == 91  # PKIX DER of a P-256 key
        assert len(p["mailgun"]["webhook_signing_key"]) == 64
        assert env["RESEND_WEBHOOK_SECRET"] == p["resend"]["webhook_secret"]
        assert env["SENDGRID_WEBHOOK_PUBLIC_KEY"] == p["sendgrid"]["webhook_public_key"]
        assert env["MAILGUN_WEBHOOK_SIGNING_KEY"] == p["mailgun"]["webhook_signing_key"]
        # Each trial has its own.
        assert other.providers["resend"]["webhook_secret"] != p["resend"]["webhook_secret"]
        assert other.providers["mailgun"]["webhook_signing_key"] != p["mailgun"]["webhook_signing_key"]

        info = stack.trial_info(t.namespace)
        assert [h["provider"] for h in info["webhooks"]] == ["resend", "postmark"]
        assert info["webhooks"][0]["retry_seconds"] == [1, 5]
        assert info["webhooks"][1]["retry_seconds"][0] == 60  # Postmark's own schedule
        assert "hookpass" not in info["webhooks"][1]["url"]
        assert "webhooks" not in stack.trial_info(other.namespace)

        t.set_webhooks([])
        assert "webhooks" not in stack.trial_info(t.namespace)
        t.set_webhooks([{"provider": "mailgun", "url": "https://127.0.0.1:9/mg"}])
        assert [h["provider"] for h in stack.trial_info(t.namespace)["webhooks"]] == ["mailgun"]
        counts = [e.get("count", 0) for e in t.events() if e["action"] == "webhooks"]
        assert counts == [2, 0, 1]
        assert not any("hookpass" in str(e) for e in t.events())


def test_invalid_webhooks_are_refused_whole(stack: Stack) -> None:
    with pytest.raises(Refused) as refused:
        stack.open_trial(webhooks=[{"provider": "resend", "url": "http://127.0.0.1:9/"}, {"provider": "resend", "url": "file:///etc/passwd"}])
    assert refused.value.code == "invalid_webhooks"
    assert refused.value.message.endswith(": webhooks[1]: url must be http:// or https://")
    with stack.open_trial(webhooks=[{"provider": "sendgrid", "url": "http://127.0.0.1:9/"}]) as t:
        with pytest.raises(Refused) as refused:
            t.set_webhooks([{"provider": "sparkpost", "url": "http://127.0.0.1:9/"}])
        assert refused.value.code == "invalid_webhooks"
        assert [h["provider"] for h in stack.trial_info(t.namespace)["webhooks"]] == ["sendgrid"]
