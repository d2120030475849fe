"""Faults on purpose, from Python: a schedule given to open_trial or
set_faults, met by the candidate's real clients (smtplib, and urllib as
a website's HTTP client), seen by the evaluator's Trial."""

from __future__ import annotations

import json
import smtplib
import time
import urllib.error
import urllib.request
from typing import Any, Dict

import pytest

from conftest import send
from mailplane import Refused, Stack, Trial


def smtp_send(trial: Trial, subject: str) -> None:
    env = trial.candidate_environment
    with smtplib.SMTP("127.0.0.1", int(str(trial.smtp_port)), timeout=10) as smtp:
        smtp.login(env["WEBSITEBENCH_SMTP_USERNAME"], env["WEBSITEBENCH_SMTP_PASSWORD"])
        smtp.sendmail(env["WEBSITEBENCH_SMTP_FROM"], ["agent@example.com"], f"Subject: {subject}\r\n\r\nYour code is 4242.\r\n")


def test_smtp_refusal_then_accepted(stack: Stack) -> None:
    with stack.open_trial(faults=[{"door": "smtp", "first": 1, "do": "refuse", "smtp_code": 451}]) as t:
        with pytest.raises(smtplib.SMTPDataError) as refused:
            smtp_send(t, "first")
        assert refused.value.smtp_code == 451
        assert refused.value.smtp_error.startswith(b"4.3.0 ")
        smtp_send(t, "second")
        assert [m.subject for m in t.messages()] == ["second"]
        info = stack.trial_info(t.namespace)
        assert info["faults_injected"] == 1
        assert info["faults"][0]["smtp_code"] == 451


def test_set_faults_refuses_http_with_retry_after(stack: Stack) -> None:
    with stack.open_trial() as t:
        send(t, "agent@example.com", subject="before")
        t.set_faults([{"door": "http", "first": 1, "do": "refuse", "status": 429, "retry_after": 2}])
        with pytest.raises(urllib.error.HTTPError) as refused:
            send(t, "agent@example.com", subject="refused")
        assert refused.value.code == 429
        assert refused.value.headers["Retry-After"] == "2"
        body: Dict[str, Any] = json.load(refused.value)
        assert body["statusCode"] == 429 and body["name"] == "rate_limit_exceeded"
        send(t, "agent@example.com", subject="after")
        assert [m.subject for m in t.messages()] == ["before", "after"]
        t.set_faults([])
        assert "faults" not in stack.trial_info(t.namespace)


def test_invalid_schedule_is_refused_whole(stack: Stack) -> None:
    with pytest.raises(Refused) as refused:
        stack.open_trial(faults=[{"first": 1, "do": "drop"}, {"first": 1, "do": "explode"}])
    assert refused.value.code == "invalid_faults" and "rule 1" in refused.value.message
    with stack.open_trial(faults=[{"first": 1, "do": "drop"}]) as t:
        with pytest.raises(Refused) as again:
            t.set_faults([{"door": "smtp", "first": 1, "do": "refuse", "status": 429}])
        assert again.value.code == "invalid_faults" and "rule 0" in again.value.message
        assert stack.trial_info(t.namespace)["faults"] == [{"door": "any", "first": 1, "do": "drop"}]


def test_delayed_message_shows_late_with_its_fault(stack: Stack) -> None:
    with stack.open_trial(faults=[{"first": 1, "do": "delay", "seconds": 2}]) as t:
        sent = time.monotonic()
        send(t, "agent@example.com", subject="late", text="Your code is 8080.")
        assert t.messages() == []
        assert t.wait_for_code(timeout=10) == "8080"
        assert time.monotonic() - sent >= 2.0
        (m,) = t.messages()
        assert m.fault == "delay" and m.to_json()["fault"] == "delay"


def test_attached_trial_cannot_set_faults(stack: Stack) -> None:
    with stack.open_trial() as t:
        reader = Trial.attach(api_url=t.api_url, namespace=t.namespace, read_capability=t.read_capability)
        with pytest.raises(Exception) as refused:
            reader.set_faults([])
        assert getattr(refused.value, "code", "") == "not_administrable"


def test_smtp_duplicate_drop_and_delay(stack: Stack) -> None:
    rules = [
        {"door": "smtp", "sends": [1], "do": "duplicate"},
        {"door": "smtp", "sends": [2], "do": "drop"},
        {"door": "smtp", "sends": [3], "do": "delay", "seconds": 1},
    ]
    with stack.open_trial(faults=rules) as t:
        for subject in ("twice", "lost", "late"):
            smtp_send(t, subject)  # each answered 250
        first = t.messages()
        assert [(m.subject, m.fault) for m in first] == [("twice", "duplicate"), ("twice", "duplicate")]
        assert first[0].id != first[1].id
        late = t.wait_for_message(after=first[-1].id, timeout=10)
        assert (late.subject, late.fault) == ("late", "delay")
        assert [m.subject for m in t.messages()] == ["twice", "twice", "late"]
        faults = [e["fault"]["do"] for e in t.events() if "fault" in e]
        assert faults == ["duplicate", "drop", "delay"]
