"""Starting, attaching to and stopping a stack."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from conftest import alive, descendants, send
from mailplane import MailplaneError, Stack, Trial, Unavailable, find_binary

BUNDLE_KEYS = {
    "namespace", "candidate_environment", "inbox_url", "api_url", "read_capability",
    "plane_socket", "data_dir", "smtp_port", "writer_url", "console_url",
}


def test_stack_is_up_with_its_trial(stack: Stack) -> None:
    assert stack.running and stack.pid is not None
    assert BUNDLE_KEYS <= set(stack.bundle)
    t = stack.trial
    assert isinstance(t, Trial) and t.namespace.startswith("trial-") and t.namespace == stack.bundle["namespace"]
    assert t.api_url == stack.api_url and t.inbox_url and t.writer_url and t.smtp_port
    env = t.candidate_environment
    assert env["WEBSITEBENCH_SMTP_PORT"] == str(t.smtp_port)
    assert env["WEBSITEBENCH_MAIL_API_URL"] == t.writer_url + "/emails"
    assert stat.S_ISSOCK(os.stat(str(stack.plane_socket)).st_mode)
    assert stack.console_url and stack.console_url.startswith("http://127.0.0.1:")


def test_find_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.path.join(os.environ["MAILPLANE_BIN"], "mail-plane")
    assert find_binary(real) == real
    assert find_binary() == real  # from MAILPLANE_BIN
    monkeypatch.delenv("MAILPLANE_BIN")
    monkeypatch.setenv("PATH", os.path.dirname(real))
    assert find_binary() == real  # from PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MailplaneError) as e:
        find_binary()
    assert e.value.code == "binary_not_found" and "MAILPLANE_BIN" in str(e.value)
    with pytest.raises(MailplaneError) as e:
        Stack(str(tmp_path / "mail-plane"))
    assert e.value.code == "binary_not_found"


def test_a_stack_that_cannot_start_says_why() -> None:
    t0 = time.monotonic()
    with pytest.raises(Unavailable) as e:
        Stack(args=["--bind-host", "192.0.2.1"])  # TEST-NET-1: no local address to listen on
    assert e.value.code == "start_failed" and "exited with status" in str(e.value)
    assert time.monotonic() - t0 < 20


def test_attach_by_bundle_json_or_file(stack: Stack, tmp_path: Path) -> None:
    t = stack.trial
    send(t, "attached@example.com", "Attached", "Seen by every view.")
    want = t.messages(recipient="attached@example.com")
    f = tmp_path / "bundle.json"
    f.write_text(json.dumps(stack.bundle))
    for b in (stack.bundle, json.dumps(stack.bundle), str(f), f):
        a = Stack.attach(b)
        assert a.pid is None and not a.running and a.trial.namespace == t.namespace
        assert a.trial.messages(recipient="attached@example.com") == want
        a.stop()  # does nothing to a stack it did not start
    assert stack.running
    by_socket = Stack.attach(plane_socket=stack.plane_socket, admin_grant_file="/nonexistent")
    with pytest.raises(MailplaneError) as e:
        by_socket.trial
    assert e.value.code == "no_trial"
    with pytest.raises(MailplaneError) as e:
        Stack.attach()
    assert e.value.code == "invalid_bundle"


def test_stop_leaves_nothing_behind() -> None:
    s = Stack()
    assert s.pid is not None
    procs = [s.pid] + descendants(s.pid)
    assert len(procs) == 7, procs  # up, the plane, the writer, the inbox, the gateway, the console, the hooks process
    data, log = s.data_dir, s.log_path
    s.stop()
    assert not s.running and "stopped (status 0)" in repr(s)
    assert not [p for p in procs if alive(p)]
    assert not os.path.exists(str(data)) and not os.path.exists(str(log))
    s.stop()  # a second stop does nothing


def test_with_stops_on_an_exception() -> None:
    procs = []
    with pytest.raises(RuntimeError):
        with Stack() as s:
            assert s.pid is not None
            procs = [s.pid] + descendants(s.pid)
            raise RuntimeError("the evaluator failed")
    assert len(procs) == 7 and not [p for p in procs if alive(p)]
