"""Trials opened and closed on a running stack over the plane's admin RPC
(trial.open, trial.close on its Unix socket)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socketserver
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from conftest import send
from mailplane import Bug, MailplaneError, Refused, Stack, Trial, Unavailable
from mailplane._http import rpc_call


def test_open_read_and_close_a_trial(stack: Stack) -> None:
    t = stack.open_trial()
    assert isinstance(t, Trial) and t.namespace != stack.trial.namespace
    assert t.messages() == []
    send(t, "fresh@example.com", "Fresh", "Your code is 8642.")
    assert t.wait_for_code(recipient="fresh@example.com", timeout=10) == "8642"
    assert all(m.subject != "Fresh" for m in stack.trial.messages())  # trials do not share mail
    reader = Trial.attach(api_url=t.api_url, namespace=t.namespace, read_capability=t.read_capability)
    t.close()
    assert t.closed
    t.close()  # a second close does nothing
    with pytest.raises(Refused) as e:
        reader.messages()
    assert e.value.code == "forbidden"


def test_open_trial_as_a_context_manager_with_ttl(stack: Stack) -> None:
    with stack.open_trial(ttl=600) as t:
        assert t.messages() == []
    assert t.closed


def test_trial_info_describes_a_trial_without_its_secrets(stack: Stack) -> None:
    with stack.open_trial(ttl=600) as t:
        info = stack.trial_info(t.namespace)
        assert info["namespace"] == t.namespace and info["profile"] == "candidate"
        assert info["smtp_port"] == t.smtp_port and info["ttl_ms"] == 600000 and info["age_ms"] >= 0
        assert t.read_capability not in json.dumps(info)
    with pytest.raises(Refused) as e:
        stack.trial_info(t.namespace)
    assert e.value.code == "not_found"


def test_a_wrong_admin_grant_is_refused(stack: Stack, tmp_path: object) -> None:
    grant = os.path.join(str(tmp_path), "admin.grant")
    with open(grant, "w") as f:
        f.write("mpg_" + "0" * 64 + "\n")
    wrong = Stack.attach(stack.bundle, admin_grant_file=grant)
    with pytest.raises(Refused) as e:
        wrong.open_trial()
    assert e.value.code == "unauthenticated" and "0" * 64 not in str(e.value)


def test_open_trial_without_an_admin_grant_is_a_clear_error(stack: Stack) -> None:
    bundle = stack.bundle
    bundle.pop("admin_grant_file", None)
    with pytest.raises(MailplaneError) as e:
        Stack.attach(bundle).open_trial()
    assert e.value.code == "no_admin_grant" and "admin_grant_file" in str(e.value)
    with pytest.raises(MailplaneError) as e:
        Stack.attach(bundle, admin_grant_file="/nonexistent/admin.grant").open_trial()
    assert e.value.code == "no_admin_grant" and "/nonexistent/admin.grant" in str(e.value)


def test_the_admin_rpc_transport(stack: Stack) -> None:
    """The Unix-socket transport open_trial uses, on a method this plane has."""
    with open(os.path.join(str(stack.data_dir), "plane", "admin.grant")) as f:
        grant = f.read().strip()
    status, answer = rpc_call(str(stack.plane_socket), grant, "trial.list", {})
    assert status == 200 and stack.trial.namespace in [t["namespace"] for t in answer["trials"]]
    with pytest.raises(Refused) as e:
        rpc_call(str(stack.plane_socket), grant, "trial.seal", {"namespace": "trial-" + "0" * 32})
    assert e.value.code == "not_found" and e.value.status == 422


def test_an_unreachable_plane_is_unavailable(stack: Stack) -> None:
    bundle = stack.bundle
    bundle["plane_socket"] = "/nonexistent/plane.sock"
    grant = os.path.join(str(stack.data_dir), "plane", "admin.grant")
    t0 = time.monotonic()
    with pytest.raises(Unavailable) as e:
        Stack.attach(bundle, admin_grant_file=grant).open_trial()
    assert e.value.code == "plane_unavailable" and time.monotonic() - t0 < 5


class _RecordingPlane(http.server.BaseHTTPRequestHandler):
    """A plane on a Unix socket that records admin calls and answers
    trial.open with the bundle it is given, trial.close as told."""

    calls: List[Tuple[str, str, str, Dict[str, Any]]] = []
    bundle: Dict[str, Any] = {}
    close_answer: Tuple[int, Dict[str, Any]] = (200, {})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append((self.path, self.headers["Authorization"], self.headers["Content-Type"], body))
        status, answer = (200, self.bundle) if self.path == "/v1/trial.open" else self.close_answer
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def address_string(self) -> str:
        return "unix"

    def log_message(self, *args: object) -> None:
        pass


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def test_open_and_close_speak_the_admin_rpc(stack: Stack, tmp_path: Path) -> None:
    """The client's side of trial.open / trial.close, byte for byte, against a
    recording plane; the trial it answers with is the session's real one."""
    sock = str(tmp_path / "plane.sock")
    srv = _UnixServer(sock, _RecordingPlane)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        real = stack.bundle
        _RecordingPlane.calls = []
        _RecordingPlane.bundle = {k: real[k] for k in ("namespace", "candidate_environment", "inbox_url", "api_url",
                                                       "read_capability", "smtp_port", "writer_url")}
        grant = tmp_path / "admin.grant"
        grant.write_text("mpg_recorded\n")
        s = Stack.attach({"plane_socket": sock, "admin_grant_file": str(grant)})
        t = s.open_trial(ttl=90)
        assert _RecordingPlane.calls == [
            ("/v1/trial.open", "Bearer mpg_recorded", "application/json", {"profile": "candidate", "ttl_ms": 90000}),
        ]
        assert t.namespace == real["namespace"] and t.candidate_environment == real["candidate_environment"]
        assert isinstance(t.messages(), list)  # it reads through the real gateway
        t.close()
        t.close()
        assert _RecordingPlane.calls[1:] == [("/v1/trial.close", "Bearer mpg_recorded", "application/json", {"namespace": real["namespace"]})]
        # A trial the plane no longer has (its TTL ran out) counts as closed;
        # a refusal or an outage is typed.
        for answer, expect in (
            ((422, {"code": "not_found", "message": "no trial"}), None),
            ((403, {"code": "permission_denied", "message": "no"}), Refused),
            ((503, {"code": "store_unavailable", "message": "down"}), Unavailable),
            ((500, {"code": "internal_error", "class": "bug", "message": "a bug"}), Bug),
            ((500, {"code": "internal_error", "message": "a bug, no class"}), Bug),
            ((503, {"code": "store_unavailable", "class": "outage", "message": "down"}), Unavailable),
        ):
            _RecordingPlane.close_answer = answer
            t = s.open_trial()
            if expect is None:
                t.close()
                assert t.closed
            else:
                with pytest.raises(expect) as e:
                    t.close()
                assert e.value.code == answer[1]["code"] and not t.closed
    finally:
        srv.shutdown()
        srv.server_close()


def test_open_trial_in_a_network_namespace(stack: Stack) -> None:
    """netns= binds the candidate's doors inside that namespace; a path that
    is no network namespace is refused and opens nothing."""
    before = len(stack._rpc("trial.list", {})["trials"])
    for path in ("/nonexistent/netns", "/proc/self/ns/uts", "relative/netns"):
        with pytest.raises(Refused) as e:
            stack.open_trial(netns=path)
        assert e.value.code == "bad_request"
    assert len(stack._rpc("trial.list", {})["trials"]) == before
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("a network namespace of its own needs root and ip")
    name = f"mpt-py-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        with stack.open_trial(netns=f"/run/netns/{name}") as t:
            env = t.candidate_environment
            assert env["WEBSITEBENCH_SMTP_HOST"] == "127.0.0.1"
            assert env["WEBSITEBENCH_MAIL_API_URL"].startswith("http://127.0.0.1:")
            script = (
                "import os, smtplib\n"
                "with smtplib.SMTP(os.environ['WEBSITEBENCH_SMTP_HOST'], int(os.environ['WEBSITEBENCH_SMTP_PORT'])) as c:\n"
                "    c.sendmail(os.environ['WEBSITEBENCH_SMTP_FROM'], ['ns@example.com'], 'Subject: in netns\\r\\n\\r\\nYour code is 9753.\\r\\n')\n"
            )
            subprocess.run(["ip", "netns", "exec", name, "/usr/bin/python3", "-c", script],
                           env={"PATH": "/usr/bin:/bin", **env}, check=True, timeout=60)
            assert t.wait_for_code(recipient="ns@example.com", timeout=10) == "9753"
    finally:
        subprocess.run(["ip", "netns", "del", name], timeout=30)


def test_a_trial_carries_providers_and_postmark_sends_with_them(stack: Stack) -> None:
    import urllib.request

    assert stack.trial.providers["ses"]["access_key_id"] == stack.trial.namespace  # up --json's own trial
    with stack.open_trial(ttl=600) as t:
        p = t.providers
        assert set(p) == {"resend", "sendgrid", "postmark", "mailgun", "ses"}  # resend: its webhook secret only
        assert p["ses"]["access_key_id"] == t.namespace and len(p["ses"]["secret_access_key"]) == 40
        env = t.candidate_environment
        body = json.dumps({"From": env["WEBSITEBENCH_MAIL_FROM"], "To": "pm@example.com", "Subject": "Postmark",
                           "TextBody": "Your code is 2468."}).encode()
        req = urllib.request.Request(p["postmark"]["base_url"] + "/email", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json",
                                              "X-Postmark-Server-Token": p["postmark"]["server_token"]})
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer = json.loads(resp.read())
        assert answer["ErrorCode"] == 0 and answer["Message"] == "OK" and answer["To"] == "pm@example.com"
        assert t.wait_for_code(recipient="pm@example.com", timeout=10) == "2468"
