"""The Python client against the Go client, pkg/mailclient: the same
message type, field by field, and the same requests, byte for byte.
tests/gowire is a small Go program over pkg/mailclient."""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import smtplib
import subprocess
import threading
import typing
from email.message import EmailMessage
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from conftest import REPO, send
from mailplane import Message, Stack, Trial


@pytest.fixture(scope="session")
def gowire(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("gowire") / "gowire")
    go = os.environ.get("GO", "go")
    env = dict(os.environ, CGO_ENABLED="0")
    subprocess.run([go, "build", "-trimpath", "-o", out, "./clients/python/tests/gowire"], cwd=REPO, env=env, check=True, timeout=300)
    return out


def python_kind(tp: Any) -> Tuple[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union and len(args) == 2 and type(None) in args:
        k, sub = python_kind(next(a for a in args if a is not type(None)))
        return "nullable " + k, sub
    if origin in (list, List):
        k, sub = python_kind(args[0])
        return "list of " + k, sub
    if dataclasses.is_dataclass(tp):
        return "object", python_fields(tp)
    return {str: "string", int: "int", bool: "bool"}[tp], None


def python_fields(cls: Any) -> Dict[str, Any]:
    hints = typing.get_type_hints(cls)
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        wire = f.metadata.get("wire", f.name)
        if wire is not None:
            out[wire] = python_kind(hints[f.name])
    return out


def go_fields(fields: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {f["name"]: (f["kind"], go_fields(f["fields"]) if f.get("fields") else None) for f in fields}


def test_message_type_matches_pkg_mailclient(gowire: str) -> None:
    go = go_fields(json.loads(subprocess.run([gowire, "fields"], capture_output=True, check=True, timeout=30).stdout))
    py = python_fields(Message)
    assert py == go


def test_real_messages_decode_as_pkg_mailclient_decodes_them(stack: Stack, gowire: str) -> None:
    t = stack.trial
    after = max([m.id for m in t.messages()], default=0)
    send(t, "wire@example.com", "Your code", "Your code is 246810. Or click https://site.example/verify?t=abc",
         html='<p>Code <b>246810</b>, <a href="https://site.example/verify?t=abc">verify</a></p>')
    send(t, "wire@example.com", "Plain", "Nothing to see.")
    msg = EmailMessage()
    msg["From"] = t.candidate_environment["WEBSITEBENCH_MAIL_FROM"]
    msg["To"] = "wire@example.com, second@example.com"
    msg["Subject"] = "With an attachment"
    msg.set_content("See the attached file. Code: 1357.")
    msg.add_attachment(b"%PDF-1.4 not really", maintype="application", subtype="pdf", filename="terms.pdf")
    env = t.candidate_environment
    with smtplib.SMTP("127.0.0.1", int(str(t.smtp_port)), timeout=10) as smtp:
        smtp.login(env["WEBSITEBENCH_SMTP_USERNAME"], env["WEBSITEBENCH_SMTP_PASSWORD"])
        smtp.send_message(msg)
    msgs = t.messages(after=after)
    assert len(msgs) == 3 and msgs[2].attachments and msgs[2].attachments[0].file_name == "terms.pdf"
    assert msgs[2].attachments[0].checksums.sha256 and msgs[2].attachments[0].size > 0
    for m in msgs:
        raw = json.dumps(m.raw)
        go = json.loads(subprocess.run([gowire, "decode"], input=raw.encode(), capture_output=True, check=True, timeout=30).stdout)
        py = m.to_json()
        assert py == go
        assert {k: v for k, v in m.raw.items() if k in py} == py  # and both are what the gateway sent


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Records each request and answers it as a gateway would."""

    calls: List[Tuple[str, str, str, str]] = []
    message = {
        "attachments": [], "codes": ["123456"], "envelope_from": "a@b.example", "id": 9, "links": [],
        "namespace": "trial-0123456789abcdef0123456789abcdef", "otp": "123456", "recipients": ["ada@example.com"],
        "subject": "s", "text": "t",
    }

    def do_GET(self) -> None:  # noqa: N802
        type(self).calls.append((self.command, self.path, self.headers.get("Authorization", ""), self.headers.get("Accept", "")))
        body = json.dumps({"messages": [self.message]} if self.path.split("?")[0].endswith("/messages") else self.message).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    _Recorder.calls = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_requests_match_pkg_mailclient(gowire: str, recorder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run([gowire, "calls", recorder], check=True, timeout=30)
    go_calls, _Recorder.calls = _Recorder.calls, []
    # The same calls as gowire's, through the Python client's public methods.
    t = Trial.attach(api_url=recorder, namespace="trial-0123456789abcdef0123456789abcdef", read_capability="cap-for-the-recorder")
    t.messages()
    t.messages(recipient="Ada Lovelace+x@Example.com", after=2)
    t.latest(recipient="ada@example.com")
    t.get(7)
    monkeypatch.setattr(Trial, "max_request_wait", 1.5)
    assert t.wait_for_code(recipient="ada@example.com", after=3, timeout=100) == "123456"
    monkeypatch.setattr(Trial, "max_request_wait", 60.0)
    assert t.wait_for_message(after=4, timeout=1000).id == 9
    assert len(go_calls) == 6
    assert _Recorder.calls == go_calls
