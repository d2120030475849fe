"""The trial's trail through the real mail-gateway: events and
wait_for_event."""

from __future__ import annotations

import threading
import time

import pytest

from conftest import send
from mailplane import Refused, Stack, Timeout, Trial


def test_events_record_sends_and_reads(stack: Stack) -> None:
    trial = stack.trial
    before = trial.events()
    after = before[-1]["seq"] if before else 0
    assert all(e["seq"] == i + 1 for i, e in enumerate(before))
    send(trial, "trail@example.com", "Hello", "Your code is 112233.")
    msgs = trial.messages(recipient="trail@example.com")
    new = trial.events(after=after)
    sends = [e for e in new if e["action"] == "send"]
    assert sends and sends[0]["outcome"] == "accepted" and sends[0]["door"] == "writer-http"
    assert sends[0]["message_ids"] == [msgs[-1].id] and sends[0]["to"] == ["trail@example.com"]
    assert sends[0]["credential"] == "mail_api_token"
    reads = [e for e in new if e["action"] == "list" and e["door"] == "gateway"]
    assert reads and reads[-1]["message_ids"][-1] == msgs[-1].id
    # Never the code, the token or the capability.
    text = repr(new)
    assert "112233" not in text and trial.read_capability not in text
    assert trial.candidate_environment["WEBSITEBENCH_MAIL_API_TOKEN"] not in text
    # The chain: each prev is the hash before.
    for a, b in zip(new, new[1:]):
        assert b["prev"] == a["hash"] and b["seq"] == a["seq"] + 1


def test_wait_for_event_returns_when_the_event_commits(stack: Stack) -> None:
    trial = stack.trial
    evs = trial.events()
    after = evs[-1]["seq"] if evs else 0
    timer = threading.Timer(0.5, send, (trial, "later@example.com", "Later", "Here."))
    timer.start()
    t0 = time.monotonic()
    e = trial.wait_for_event(action="send", outcome="accepted", after=after, timeout=20)
    timer.join()
    assert e["to"] == ["later@example.com"] and e["seq"] > after
    assert 0.4 < time.monotonic() - t0 < 5


def test_wait_for_event_times_out(stack: Stack) -> None:
    trial = stack.trial
    with pytest.raises(Timeout):
        trial.wait_for_event(action="rotate", timeout=0.5)


def test_events_need_the_read_capability(stack: Stack) -> None:
    other = Trial.attach(api_url=stack.trial.api_url, namespace=stack.trial.namespace, read_capability="0" * 64)
    with pytest.raises(Refused) as e:
        other.events()
    assert e.value.code == "forbidden"
