"""Reading and waiting through the real mail-gateway."""

from __future__ import annotations

import datetime
import http.server
import threading
import time
from typing import Any, List

import pytest

import mailplane._trial
from conftest import plane_pid, send
from mailplane import Bug, MailplaneError, Message, Refused, Stack, Timeout, Trial, Unavailable


def test_read_messages_latest_get(stack: Stack) -> None:
    trial = stack.trial
    before = len(trial.messages())
    send(trial, "reader@example.com", "First", "Your code is 424242.")
    send(trial, "Other@Example.com", "Second", "No code here.")
    msgs = trial.messages()
    assert len(msgs) == before + 2
    first, second = msgs[-2], msgs[-1]
    assert isinstance(first, Message) and first.id + 1 == second.id
    assert first.subject == "First" and first.otp == "424242" and first.codes[0] == "424242"
    assert first.recipients == ["reader@example.com"] and first.namespace == trial.namespace
    assert first.envelope_from == trial.candidate_environment["WEBSITEBENCH_MAIL_FROM"]
    assert second.otp is None
    assert trial.latest() == second
    assert trial.get(first.id) == first
    assert [m.id for m in trial.messages(recipient="other@example.com")] == [second.id]
    assert trial.messages(after=second.id) == []
    assert trial.latest(after=second.id) is None
    with pytest.raises(Refused) as e:
        trial.get(second.id + 1000)
    assert e.value.code == "message_not_found" and e.value.status == 404


def test_wait_for_message_returns_when_mail_commits(stack: Stack) -> None:
    trial = stack.trial
    after = max([m.id for m in trial.messages()], default=0)
    timer = threading.Timer(0.5, send, (trial, "waiter@example.com", "Later", "Here it is."))
    timer.start()
    t0 = time.monotonic()
    m = trial.wait_for_message(recipient="waiter@example.com", after=after, timeout=20)
    took = time.monotonic() - t0
    timer.join()
    assert m.subject == "Later" and m.id > after
    assert 0.4 < took < 5, took


def test_wait_for_code_passes_over_mail_without_a_code(stack: Stack) -> None:
    trial = stack.trial
    after = max([m.id for m in trial.messages()], default=0)

    def site() -> None:
        send(trial, "code@example.com", "Welcome", "Thanks for signing up.")
        time.sleep(0.3)
        send(trial, "code@example.com", "Your code", "Your verification code is 135791.")

    threading.Timer(0.2, site).start()
    assert trial.wait_for_code(recipient="code@example.com", after=after, timeout=20) == "135791"


def test_wait_for_code_times_out_naming_what_it_passed_over(stack: Stack) -> None:
    trial = stack.trial
    after = max([m.id for m in trial.messages()], default=0)
    send(trial, "nocode@example.com", "Welcome", "Thanks for signing up.")
    with pytest.raises(Timeout) as e:
        trial.wait_for_code(recipient="nocode@example.com", after=after, timeout=1)
    assert e.value.code == "timeout"
    assert "1 other message(s) arrived" in str(e.value)


def test_wait_for_link_times_out_naming_the_links_that_arrived(stack: Stack) -> None:
    trial = stack.trial
    after = max([m.id for m in trial.messages()], default=0)
    send(trial, "nolink@example.com", "Welcome", "Thanks for signing up.")
    send(trial, "nolink@example.com", "Your code", "Your code is 246801. Questions? https://site.example/help")
    got = trial.messages(recipient="nolink@example.com", after=after)
    assert [m.action_link for m in got] == [None, None] and got[1].links == ["https://site.example/help"] and got[1].otp == "246801"
    with pytest.raises(Timeout) as e:
        trial.wait_for_link(recipient="nolink@example.com", after=after, timeout=1)
    assert e.value.code == "timeout"
    assert "2 other message(s) arrived, 1 with links, none an action link: https://site.example/help" in str(e.value), str(e.value)

    after = got[1].id
    send(trial, "nolink@example.com", "Welcome again", "Thanks for signing up.")
    with pytest.raises(Timeout) as e:
        trial.wait_for_link(recipient="nolink@example.com", after=after, timeout=1)
    assert "1 other message(s) arrived, none with a link" in str(e.value), str(e.value)


def test_message_has_its_time_display_name_and_html(stack: Stack) -> None:
    trial = stack.trial
    before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=2)
    html = '<p>Your code is <b>864200</b></p><a href="https://site.example/verify?t=1">Confirm</a>'
    send(trial, "fields@example.com", "Fields", "Your code is 864200.", html=html, name="Acme Büro")
    send(trial, "fields@example.com", "Plain", "No name, no HTML.")
    named, plain = trial.messages(recipient="fields@example.com")
    after = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
    assert named.from_name == "Acme Büro" and named.html == html and named.envelope_from == trial.candidate_environment["WEBSITEBENCH_MAIL_FROM"]
    assert plain.from_name == "" and plain.html == ""
    for m in (named, plain):
        assert m.received_at.endswith("Z") and m.received_at == m.raw["received_at"]
        received = m.received
        assert received is not None and received.utcoffset() == datetime.timedelta(0) and before <= received <= after, m.received_at
    assert named.received is not None and plain.received is not None and named.received <= plain.received


def test_received_reads_every_rfc3339_form() -> None:
    utc = datetime.timezone.utc
    assert Message(received_at="2026-12-06T01:02:03.123456789Z").received == datetime.datetime(2026, 12, 6, 1, 2, 3, 123456, tzinfo=utc)
    assert Message(received_at="2026-12-06T01:02:03.5Z").received == datetime.datetime(2026, 12, 6, 1, 2, 3, 500000, tzinfo=utc)
    assert Message(received_at="2026-12-06T01:02:03Z").received == datetime.datetime(2026, 12, 6, 1, 2, 3, tzinfo=utc)
    assert Message().received is None


def test_wait_for_link(stack: Stack) -> None:
    trial = stack.trial
    after = max([m.id for m in trial.messages()], default=0)
    send(trial, "link@example.com", "Confirm your address", "Confirm: https://site.example/verify?t=abc123")
    m = trial.wait_for_message(recipient="link@example.com", after=after, timeout=10)
    assert trial.wait_for_link(recipient="link@example.com", after=after, timeout=10) == m.action_link
    assert m.action_link == "https://site.example/verify?t=abc123"


def test_wait_times_out(stack: Stack) -> None:
    trial = stack.trial
    t0 = time.monotonic()
    with pytest.raises(Timeout) as e:
        trial.wait_for_message(recipient="nobody@example.com", timeout=1.0)
    took = time.monotonic() - t0
    assert e.value.code == "timeout" and isinstance(e.value, MailplaneError)
    assert "nobody@example.com" in str(e.value) and "within 1s" in str(e.value)
    assert 0.95 <= took < 3, took


def test_a_long_wait_is_a_loop_of_bounded_requests(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    trial = stack.trial
    after = max([m.id for m in trial.messages()], default=0)
    calls: List[Any] = []
    real = mailplane._trial.gateway_get

    def counting(api_url: str, path: str, query: Any, capability: str, timeout: float, secrets: Any = ()) -> Any:
        calls.append((time.monotonic(), dict(query)))
        return real(api_url, path, query, capability, timeout, secrets)

    monkeypatch.setattr(mailplane._trial, "gateway_get", counting)
    monkeypatch.setattr(Trial, "max_request_wait", 0.4)
    # Nothing arrives: ~1.5 s of waiting is 4 held requests (3 on a slow
    # machine), none tighter.
    with pytest.raises(Timeout):
        trial.wait_for_message(recipient="loop@example.com", after=after, timeout=1.5)
    assert 3 <= len(calls) <= 5, calls
    for _, q in calls:
        assert q["wait"].endswith("ms") and 1 <= int(q["wait"][:-2]) <= 400
        assert q["recipient"] == "loop@example.com" and q["after"] == str(after)
    # Mail arriving during the third request ends the wait at once.
    calls.clear()
    threading.Timer(1.0, send, (trial, "loop@example.com", "Third", "During the third request.")).start()
    m = trial.wait_for_message(recipient="loop@example.com", after=after, timeout=10)
    assert m.subject == "Third" and 2 <= len(calls) <= 4, calls


def test_wrong_capability_is_a_typed_refusal(stack: Stack) -> None:
    wrong = "f" * 64
    reader = Trial.attach(api_url=stack.trial.api_url, namespace=stack.trial.namespace, read_capability=wrong)
    for call in (reader.messages, reader.latest, lambda: reader.get(1), lambda: reader.wait_for_message(timeout=5)):
        with pytest.raises(Refused) as e:
            call()
        assert e.value.code == "forbidden" and e.value.status == 403
        assert wrong not in str(e.value) and wrong not in repr(e.value)
    with pytest.raises(MailplaneError) as ne:
        reader.close()
    assert ne.value.code == "not_closable"


def test_attached_reader_reads_the_same_mail(stack: Stack) -> None:
    t = stack.trial
    send(t, "attach@example.com", "For the evaluator", "Code 97531.")
    reader = Trial.attach(api_url=t.api_url, namespace=t.namespace, read_capability=t.read_capability)
    assert reader.messages(recipient="attach@example.com") == t.messages(recipient="attach@example.com")
    assert reader.candidate_environment == {} and reader.inbox_url is None


def test_nothing_listening_is_unavailable() -> None:
    reader = Trial.attach(api_url="http://127.0.0.1:9", namespace="trial-" + "0" * 32, read_capability="a" * 64)
    with pytest.raises(Unavailable) as e:
        reader.wait_for_message(timeout=5)
    assert e.value.code == "unreachable" and "a" * 64 not in str(e.value)


def _wait_in_thread(trial: Trial, timeout: float) -> "tuple[threading.Thread, List[BaseException]]":
    errors: List[BaseException] = []

    def run() -> None:
        try:
            trial.wait_for_message(recipient="outage@example.com", timeout=timeout)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)

    th = threading.Thread(target=run)
    th.start()
    return th, errors


def test_plane_killed_mid_wait_is_a_clear_outage(own_stack: Stack) -> None:
    trial = own_stack.trial
    t0 = time.monotonic()
    th, errors = _wait_in_thread(trial, 60)
    time.sleep(0.7)  # the wait is held by the gateway now
    import os
    import signal

    os.kill(plane_pid(own_stack), signal.SIGKILL)
    th.join(15)
    took = time.monotonic() - t0
    assert not th.is_alive(), "the wait hung after the plane died"
    assert len(errors) == 1 and isinstance(errors[0], Unavailable), errors
    assert took < 15
    err = errors[0]
    assert err.code in ("mailpit_unavailable", "unreachable"), err
    assert trial.read_capability not in str(err)


def test_stack_stopped_mid_wait_is_a_clear_outage(own_stack: Stack) -> None:
    trial = own_stack.trial
    th, errors = _wait_in_thread(trial, 60)
    time.sleep(0.7)
    own_stack.stop()
    th.join(15)
    assert not th.is_alive(), "the wait hung after the stack stopped"
    assert len(errors) == 1 and isinstance(errors[0], Unavailable), errors
    # Further reads say the stack is gone.
    with pytest.raises(Unavailable) as e:
        trial.messages()
    assert e.value.code == "unreachable" and "the stack has been stopped" in str(e.value)


class _Answers(http.server.BaseHTTPRequestHandler):
    """A gateway that answers every read with the status and body set on
    the class."""

    status = 500
    body = b""

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_bug_is_not_an_outage() -> None:
    """The gateway's 500 internal_error and an answer that does not decode
    are Bug, never Unavailable; a 503 is Unavailable; a 403 Refused."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        reader = Trial.attach(api_url=f"http://127.0.0.1:{srv.server_address[1]}", namespace="trial-" + "2" * 32, read_capability="c" * 64)
        for status, body, cls, code in (
            (500, b'{"error":"internal_error","message":"Unexpected error.","name":"internal_server_error","statusCode":500}', Bug, "internal_error"),
            (200, b'{"messages": [', Bug, "undecodable_answer"),
            (503, b'{"error":"mailpit_unavailable","message":"down","name":"application_error","statusCode":503}', Unavailable, "mailpit_unavailable"),
            (403, b'{"error":"forbidden","message":"no","name":"invalid_api_key","statusCode":403}', Refused, "forbidden"),
        ):
            _Answers.status, _Answers.body = status, body
            with pytest.raises(MailplaneError) as e:
                reader.messages()
            assert type(e.value) is cls and e.value.code == code, (status, e.value)
    finally:
        srv.shutdown()
        srv.server_close()
