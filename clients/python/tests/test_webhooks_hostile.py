"""Provider webhooks against hostile endpoints: the candidate owns the
URL its webhooks go to, so each test here is an endpoint that misbehaves
on purpose, and checks that it holds only its own trial's share."""

from __future__ import annotations

import json
import socket
import threading
import urllib.request
from typing import Any, Dict, List

import pytest

from conftest import recording_server, send, wait_until
from mailplane import Stack, Trial

# internal/limits: TrialWebhookPending, Webhooks.
TRIAL_WEBHOOK_PENDING = 1024
WEBHOOKS = 8


def gateway_webhooks(t: Trial) -> List[Dict[str, Any]]:
    req = urllib.request.Request(f"{t.api_url}/api/namespaces/{t.namespace}/webhooks", headers={"Authorization": "Bearer " + t.read_capability})
    with urllib.request.urlopen(req, timeout=30) as r:
        return list(json.load(r)["webhooks"])


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on: every attempt is refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def test_outbox_is_bounded_per_trial() -> None:
    """Many sends to webhooks whose endpoint never takes an event: the
    trial's pending events stop at the bound, the rest are failed at once."""
    url = f"http://127.0.0.1:{closed_port()}/never"
    hooks = [{"provider": "resend", "url": url, "retry_seconds": [3600]} for _ in range(WEBHOOKS)]
    with Stack(args=["--quota-messages", "0"]) as stack, stack.open_trial(webhooks=hooks) as t:
        sends = TRIAL_WEBHOOK_PENDING // (2 * WEBHOOKS) + 8  # each: sent and delivered, to each webhook
        for n in range(sends):
            send(t, "agent@example.com", subject=f"n{n}")
        want = sends * 2 * WEBHOOKS
        assert wait_until(lambda: len(gateway_webhooks(t)) >= want, 60), len(gateway_webhooks(t))
        states = [w["state"] for w in gateway_webhooks(t)]
        assert len(states) == want
        assert states.count("pending") == TRIAL_WEBHOOK_PENDING, {s: states.count(s) for s in set(states)}
        assert states.count("failed") == want - TRIAL_WEBHOOK_PENDING


class Listener:
    """A real TCP listener on 127.0.0.1 (backlog ``backlog``) whose
    connections, from a thread of its own, go to ``accepted``."""

    def __init__(self, backlog: int) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted(c)

    def accepted(self, c: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.sock.close()


def read_head(c: socket.socket) -> bool:
    """Reads a request's head from c; False if c ended before it."""
    got = bytearray()
    while b"\r\n\r\n" not in got:
        chunk = c.recv(65536)
        if not chunk:
            return False
        got += chunk
    return True


class RawEndpoint(Listener):
    """A real TCP endpoint on 127.0.0.1 that reads each request and
    answers it with fixed bytes (or not at all), counting the requests."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.requests = 0
        super().__init__(16)

    def accepted(self, c: socket.socket) -> None:
        threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c: socket.socket) -> None:
        with c:
            c.settimeout(30)
            try:
                if not read_head(c):
                    return
                self.requests += 1
                c.sendall(self.answer)
            except OSError:
                pass


def attempts(t: Trial) -> List[Dict[str, Any]]:
    return [e["webhook"] for e in t.events() if e["action"] == "webhook"]


def test_huge_answer_headers_are_not_taken(stack: Stack) -> None:
    """An endpoint that answers 200 with a megabyte of headers: the hooks
    process reads a bounded answer, so the attempt fails (and is retried)
    rather than being taken as delivered."""
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(1024)) + b"Content-Length: 0\r\n\r\n"
    e = RawEndpoint(head)
    try:
        with stack.open_trial(webhooks=[{"provider": "resend", "url": e.url + "/h", "retry_seconds": [3600]}]) as t:
            send(t, "agent@example.com")
            assert wait_until(lambda: len(attempts(t)) >= 1, 20)
            first = attempts(t)[0]
            assert first["state"] == "pending" and "status" not in first and first["error"] == "connect", first
            assert e.requests == 1
    finally:
        e.close()


def test_redirects_are_not_followed(stack: Stack) -> None:
    """An endpoint that redirects to another trial's endpoint: the answer is
    the redirect (a failed attempt), and the other endpoint gets nothing."""
    other = RawEndpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    redirect = RawEndpoint(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: " + other.url.encode() + b"/stolen\r\nContent-Length: 0\r\n\r\n")
    try:
        with stack.open_trial(webhooks=[{"provider": "resend", "url": redirect.url + "/r", "retry_seconds": [3600]}]) as t:
            send(t, "agent@example.com")
            assert wait_until(lambda: len(attempts(t)) >= 1, 20)
            assert attempts(t)[0]["status"] == 307 and attempts(t)[0]["state"] == "pending"
            assert redirect.requests == 1 and other.requests == 0
    finally:
        other.close()
        redirect.close()


def test_netns_slow_connect_holds_only_its_own_trial(stack: Stack) -> None:
    """Two netns trials: A's site takes no connection (its listener's queue
    is full, so every connect waits out limits.WebhookTimeout), B's answers
    at once. The supervisor makes each netns dial on its own, so B's
    events are delivered while A's connects are still waiting, not after
    them (before, the supervisor dialed one at a time)."""
    import os
    import shutil
    import subprocess
    import tempfile

    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("ss") is None:
        pytest.skip("network namespaces of their own need root, ip and ss")
    names = [f"mpt-hka-{os.getpid()}", f"mpt-hkb-{os.getpid()}"]
    procs: List["subprocess.Popen[bytes]"] = []
    out = tempfile.NamedTemporaryFile(delete=False)
    # A: a listener that never accepts, its queue filled by its own
    # connections, so the kernel drops every further SYN.
    stuck = (
        "import socket, sys, time\n"
        "l = socket.socket(); l.bind(('127.0.0.1', 8025)); l.listen(0)\n"
        "held = []\n"
        "for _ in range(4):\n"
        "    c = socket.socket(); c.setblocking(False); c.connect_ex(('127.0.0.1', 8025)); held.append(c)\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    served = recording_server(8026, "ThreadingHTTPServer")
    sender = (
        "import json, os, sys, urllib.request\n"
        "for n in range(int(sys.argv[1])):\n"
        "    body = json.dumps({'from': os.environ['WEBSITEBENCH_MAIL_FROM'], 'to': ['ns@example.com'], 'subject': f'n{n}', 'text': 'hi'}).encode()\n"
        "    req = urllib.request.Request(os.environ['WEBSITEBENCH_MAIL_API_URL'], data=body, method='POST', headers={'Content-Type': 'application/json', 'Authorization': 'Bearer ' + os.environ['WEBSITEBENCH_MAIL_API_TOKEN']})\n"
        "    urllib.request.urlopen(req, timeout=10).read()\n"
    )

    def run_in(name: str, t: Trial, script: str, *args: str) -> None:
        subprocess.run(["ip", "netns", "exec", name, "/usr/bin/python3", "-c", script, *args],
                       env={"PATH": "/usr/bin:/bin", **t.candidate_environment}, check=True, timeout=60, capture_output=True)

    def syn_sent(name: str) -> int:
        r = subprocess.run(["ip", "netns", "exec", name, "ss", "-Htn", "state", "syn-sent"], check=True, timeout=30, capture_output=True, text=True)
        return len(r.stdout.splitlines())

    def got() -> List[Any]:
        with open(out.name, "rb") as f:
            return [json.loads(line) for line in f.read().splitlines() if line]

    try:
        for name in names:
            subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
            subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True, timeout=30)
        a = subprocess.Popen(["ip", "netns", "exec", names[0], "/usr/bin/python3", "-c", stuck], stdout=subprocess.PIPE)
        procs.append(a)
        assert a.stdout is not None and a.stdout.readline() == b"ready\n"
        procs.append(subprocess.Popen(["ip", "netns", "exec", names[1], "/usr/bin/python3", "-c", served, out.name]))
        hook = {"provider": "resend", "retry_seconds": [3600]}
        with stack.open_trial(netns=f"/run/netns/{names[0]}", webhooks=[{**hook, "url": "http://127.0.0.1:8025/a"}]) as ta, \
                stack.open_trial(netns=f"/run/netns/{names[1]}", webhooks=[{**hook, "url": "http://127.0.0.1:8026/b"}]) as tb:
            run_in(names[0], ta, sender, "4")  # four sends: A's whole share of deliveries
            assert wait_until(lambda: syn_sent(names[0]) >= 1, 20)
            run_in(names[1], tb, sender, "1")
            assert wait_until(lambda: len(got()) >= 2, 30), attempts(tb)
            assert [e["type"] for e in got()] == ["email.sent", "email.delivered"]
            # B was served while A's connects still waited out their bound.
            assert attempts(ta) == []
            # And A's end as they must: a timeout, to be retried.
            assert wait_until(lambda: len(attempts(ta)) >= 4, 30)
            assert {(w["error"], w["state"]) for w in attempts(ta)} == {("timeout", "pending")}, attempts(ta)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for name in names:
            subprocess.run(["ip", "netns", "del", name], timeout=30)
        os.unlink(out.name)


def test_webhook_secrets_are_never_shown() -> None:
    """The trial's webhook keys and a Postmark URL's Basic credentials,
    through delivered and failed attempts, are in no log line (at debug),
    trail event, gateway list, trial info or console page."""
    ok = RawEndpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    refused = f"127.0.0.1:{closed_port()}"
    host = ok.url[len("http://"):]
    try:
        with Stack(log_level="debug") as stack:
            hooks = [{"provider": "postmark", "url": f"http://pm-user:pm-s3cret-pass@{host}/pm"},
                     {"provider": "postmark", "url": f"http://pm-user:pm-s3cret-pass@{refused}/pm", "retry_seconds": [3600]},
                     {"provider": "resend", "url": ok.url + "/r"}, {"provider": "mailgun", "url": ok.url + "/m"},
                     {"provider": "sendgrid", "url": ok.url + "/s"}]
            with stack.open_trial(webhooks=hooks) as t:
                send(t, "agent@example.com")
                # postmark delivered; resend, mailgun, sendgrid: sent and delivered; the refused one attempted
                assert wait_until(lambda: len(attempts(t)) >= 8, 20), attempts(t)
                secrets = ["pm-s3cret-pass", t.providers["resend"]["webhook_secret"], t.providers["resend"]["webhook_secret"][len("whsec_"):],
                           t.providers["mailgun"]["webhook_signing_key"]]
                assert stack.console_url and stack._admin_grant_file
                grant = open(stack._admin_grant_file).read().strip()
                req = urllib.request.Request(f"{stack.console_url}/trials/{t.namespace}", headers={"Authorization": "Bearer " + grant})
                shown = {
                    "events": json.dumps(t.events()),
                    "gateway": json.dumps(gateway_webhooks(t)),
                    "info": json.dumps(stack.trial_info(t.namespace)),
                    "console": urllib.request.urlopen(req, timeout=10).read().decode(),
                }
                assert "pm-user" in shown["gateway"] or "redacted" in shown["gateway"]  # the URL is listed, without its password
                assert "connect" in shown["events"]  # the refused attempt is on the record
            assert stack.log_path
            with open(stack.log_path, encoding="utf-8", errors="replace") as f:
                shown["log"] = f.read()
            assert "webhook attempt" in shown["log"]  # the hooks process's debug lines are there
            for where, text in shown.items():
                for s in secrets:
                    assert s not in text, (where, s[:6])
    finally:
        ok.close()


class SilentEndpoint(Listener):
    """A real TCP endpoint that accepts, reads, and never answers (or,
    with ``trickle``, answers 200 and then one body byte a second)."""

    def __init__(self, trickle: bool = False) -> None:
        self.trickle = trickle
        self.conns: List[socket.socket] = []
        self.stop = threading.Event()
        super().__init__(64)

    def accepted(self, c: socket.socket) -> None:
        self.conns.append(c)
        if self.trickle:
            threading.Thread(target=self._trickle, args=(c,), daemon=True).start()

    def _trickle(self, c: socket.socket) -> None:
        try:
            # The request's head first: an answer sent before the request
            # is on a connection Go's client may not have handed a request
            # yet, which it drops as unsolicited (an error, not a status).
            if not read_head(c):
                return
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not self.stop.wait(1):
                c.sendall(b"x")
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        super().close()
        for c in self.conns:
            c.close()


def test_silent_endpoints_hold_only_their_own_trial(stack: Stack) -> None:
    """Trial A's endpoint accepts and never answers, trial C's trickles a
    byte a second: each fills its own share of deliveries, and trial B's
    events are delivered while theirs still wait; theirs then end at the
    attempt's bound, as timeouts (A) or as the answered status (C)."""
    silent, trickle, fine = SilentEndpoint(), SilentEndpoint(trickle=True), RawEndpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    hook = {"provider": "resend", "retry_seconds": [3600]}
    try:
        with stack.open_trial(webhooks=[{**hook, "url": silent.url + "/a"}]) as ta, \
                stack.open_trial(webhooks=[{**hook, "url": trickle.url + "/c"}]) as tc, \
                stack.open_trial(webhooks=[{**hook, "url": fine.url + "/b"}]) as tb:
            for n in range(6):  # more than a trial's share (4) each
                send(ta, "agent@example.com", subject=f"a{n}")
                send(tc, "agent@example.com", subject=f"c{n}")
            assert wait_until(lambda: len(silent.conns) >= 4 and len(trickle.conns) >= 4, 20)
            send(tb, "agent@example.com")
            assert wait_until(lambda: fine.requests >= 2, 20)
            assert wait_until(lambda: [w["state"] for w in attempts(tb)] == ["delivered", "delivered"], 10), attempts(tb)
            # A's and C's attempts were all still waiting while B's went.
            assert attempts(ta) == [] and attempts(tc) == []
            assert len(silent.conns) == 4 and len(trickle.conns) == 4  # no more than their shares at once
            assert wait_until(lambda: len(attempts(ta)) >= 4 and len(attempts(tc)) >= 4, 30)
            assert {(w["error"], w["state"]) for w in attempts(ta)} == {("timeout", "pending")}, attempts(ta)
            assert {w.get("status") for w in attempts(tc)} == {200}, attempts(tc)
    finally:
        for e in (silent, trickle, fine):
            e.close()


def test_an_endpoint_failing_forever_gets_its_schedule_then_nothing(stack: Stack) -> None:
    """An endpoint that answers 500 to everything: each event is attempted
    once and once per wait of the schedule, the same event id each time,
    then recorded failed and never attempted again."""
    e = RawEndpoint(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
    try:
        with stack.open_trial(webhooks=[{"provider": "mailgun", "url": e.url + "/m", "retry_seconds": [0, 1]}]) as t:
            send(t, "agent@example.com")
            # accepted: 3 attempts, failed; then delivered: 3 attempts, failed
            assert wait_until(lambda: [w["state"] for w in gateway_webhooks(t)] == ["failed", "failed"], 20), gateway_webhooks(t)
            listed = gateway_webhooks(t)
            assert [[a.get("status") for a in w["attempts"]] for w in listed] == [[500, 500, 500], [500, 500, 500]]
            assert [(a["attempt"], a["state"]) for a in attempts(t)] == [(1, "pending"), (2, "pending"), (3, "failed")] * 2
            # Nothing more comes: a send to another trial's endpoint, once
            # answered, shows the deliverer has moved on.
            marker = RawEndpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            try:
                with stack.open_trial(webhooks=[{"provider": "mailgun", "url": marker.url + "/k"}]) as other:
                    send(other, "agent@example.com")
                    assert wait_until(lambda: marker.requests >= 2, 20)
            finally:
                marker.close()
            assert e.requests == 6
    finally:
        e.close()
