"""No minted secret in a repr() or an exception's message."""

from __future__ import annotations

import http.server
import json
import os
import threading
from typing import Iterator, List

import pytest

from conftest import send
from mailplane import MailplaneError, Refused, Stack, Timeout, Trial, Unavailable
from mailplane._errors import redact
from mailplane._http import rpc_call


def secrets_of(stack: Stack) -> List[str]:
    env = stack.trial.candidate_environment
    token = stack.trial.inbox_url.rsplit("/inbox/", 1)[1]
    out = [stack.trial.read_capability, env["WEBSITEBENCH_MAIL_API_TOKEN"], env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"], token]
    data = str(stack.data_dir)
    for name in ("plane/admin.grant", "plane/gateway.grant", "plane/writer.grant", "plane/inbox.grant"):
        with open(os.path.join(data, name)) as f:
            out.append(f.read().strip())
    assert all(len(s) >= 40 for s in out)
    return out


def assert_clean(text: str, secrets: List[str]) -> None:
    for s in secrets:
        assert s not in text, f"a secret ({s[:6]}...) leaked into {text!r}"


def test_reprs_hold_no_secret(stack: Stack) -> None:
    secrets = secrets_of(stack)
    t = stack.trial
    reader = Trial.attach(api_url=t.api_url, namespace=t.namespace, read_capability=t.read_capability)
    attached = Stack.attach(stack.bundle)
    for obj in (stack, t, reader, attached, attached.trial):
        assert_clean(repr(obj), secrets)
        assert_clean(str(obj), secrets)
    assert t.namespace in repr(t)


def test_exceptions_hold_no_secret(stack: Stack) -> None:
    secrets = secrets_of(stack)
    t = stack.trial
    errors: List[MailplaneError] = []
    # A wrong capability that differs from the right one by one character.
    wrong = t.read_capability[:-1] + ("0" if t.read_capability[-1] != "0" else "1")
    for cap in (wrong, t.read_capability + "x"):
        with pytest.raises(Refused) as e:
            Trial.attach(api_url=t.api_url, namespace=t.namespace, read_capability=cap).messages()
        errors.append(e.value)
        assert_clean(str(e.value), [cap])
    with pytest.raises(Timeout) as te:
        t.wait_for_message(recipient="secret-timeout@example.com", timeout=0.2)
    errors.append(te.value)
    # The admin RPC, refused with a wrong grant and answered with the right one.
    admin_grant = secrets[3]
    for grant in (admin_grant[:-4] + "0000", admin_grant):
        with pytest.raises(Refused) as re_:
            rpc_call(str(stack.plane_socket), grant, "no.such.method" if grant == admin_grant else "trial.list", {})
        errors.append(re_.value)
        assert_clean(str(re_.value), [grant])
    assert errors[-2].code == "unauthenticated" and errors[-2].status == 401
    assert errors[-1].code == "unknown_method" and errors[-1].status == 404
    with pytest.raises(Unavailable) as ue:
        rpc_call("/nonexistent/plane.sock", admin_grant, "trial.list", {})
    assert ue.value.code == "plane_unavailable"
    errors.append(ue.value)
    for err in errors:
        assert_clean(str(err), secrets)
        assert_clean(repr(err), secrets)
        assert_clean(" ".join(str(a) for a in err.args), secrets)


def test_outage_messages_hold_no_secret() -> None:
    s = Stack()
    secrets = secrets_of(s)
    t = s.trial
    send(t, "outage-secret@example.com", "x", "y")
    s.stop()
    with pytest.raises(Unavailable) as e:
        t.messages()
    assert_clean(str(e.value), secrets)


class _Echo(http.server.BaseHTTPRequestHandler):
    """A gateway that puts the caller's Bearer value in its error message."""

    def do_GET(self) -> None:  # noqa: N802
        cred = self.headers.get("Authorization", "")[len("Bearer ") :]
        body = json.dumps({"error": "forbidden", "message": f"capability {cred} and stray {'ab' * 32} refused"}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo_url() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_a_server_echoing_a_secret_does_not_leak_it(echo_url: str) -> None:
    cap = "not-a-minted-format-but-still-my-secret"
    with pytest.raises(Refused) as e:
        Trial.attach(api_url=echo_url, namespace="trial-" + "1" * 32, read_capability=cap).messages()
    assert e.value.code == "forbidden"
    assert cap not in str(e.value) and "ab" * 32 not in str(e.value) and "[redacted]" in str(e.value)


def test_redact_knows_the_minted_formats() -> None:
    text = f"grant mpg_{'a1' * 32} cap {'b2' * 32} inbox {'Az_-' * 10}xyz known hunter2 ns trial-{'c' * 32}"
    out = redact(text, ["hunter2"])
    assert "a1a1" not in out and "b2b2" not in out and "Az_-" not in out and "hunter2" not in out
    assert f"trial-{'c' * 32}" in out  # a namespace is not a secret
