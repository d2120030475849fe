"""Provider webhooks against hostile endpoints: the candidate owns the
URL its webhooks go to, so each test here is an endpoint that misbehaves
on purpose, and checks that it holds only its own trial's share."""

from __future__ import annotations

import json
import socket
import threading
import urllib.request
from typing import Any, Dict, List

from conftest import send, wait_until
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


class RawEndpoint:
    """A real TCP endpoint on 127.0.0.1 that reads each request and
    answers it with fixed bytes (or not at all), counting the requests."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.requests = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c: socket.socket) -> None:
        with c:
            c.settimeout(30)
            got = b""
            try:
                while b"\r\n\r\n" not in got:
                    chunk = c.recv(65536)
                    if not chunk:
                        return
                    got += chunk
                self.requests += 1
                c.sendall(self.answer)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


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
