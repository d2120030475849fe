"""Trials opened and closed on a running stack over the plane's admin RPC
(trial.open, trial.close on its Unix socket)."""

from __future__ import annotations

import http.server
import json
import os
import socketserver
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from conftest import send
from mailplane import MailplaneError, Refused, Stack, Trial, Unavailable
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
