"""Provider webhooks, from Python: set by the harness at open_trial or
set_webhooks, with the trial's own verification material in its bundle."""

from __future__ import annotations

import base64

import pytest

from mailplane import Refused, Stack


def test_open_trial_with_webhooks(stack: Stack) -> None:
    hooks = [
        {"provider": "resend", "url": "http://127.0.0.1:9/resend", "retry_seconds": [1, 5]},
        {"provider": "postmark", "url": "http://hookuser:hookpass@127.0.0.1:9/postmark"},
    ]
    with stack.open_trial(webhooks=hooks) as t, stack.open_trial() as other:
        p, env = t.providers, t.candidate_environment
        assert p["resend"]["webhook_secret"].startswith("whsec_")
        assert len(base64.b64decode(p["resend"]["webhook_secret"][len("whsec_") :])) == 32
        assert len(base64.b64decode(p["sendgrid"]["webhook_public_key"])) == 91  # PKIX DER of a P-256 key
        assert len(p["mailgun"]["webhook_signing_key"]) == 64
        assert env["RESEND_WEBHOOK_SECRET"] == p["resend"]["webhook_secret"]
        assert env["SENDGRID_WEBHOOK_PUBLIC_KEY"] == p["sendgrid"]["webhook_public_key"]
        assert env["MAILGUN_WEBHOOK_SIGNING_KEY"] == p["mailgun"]["webhook_signing_key"]
        # Each trial has its own.
        assert other.providers["resend"]["webhook_secret"] != p["resend"]["webhook_secret"]
        assert other.providers["mailgun"]["webhook_signing_key"] != p["mailgun"]["webhook_signing_key"]

        info = stack.trial_info(t.namespace)
        assert [h["provider"] for h in info["webhooks"]] == ["resend", "postmark"]
        assert info["webhooks"][0]["retry_seconds"] == [1, 5]
        assert info["webhooks"][1]["retry_seconds"][0] == 60  # Postmark's own schedule
        assert "hookpass" not in info["webhooks"][1]["url"]
        assert "webhooks" not in stack.trial_info(other.namespace)

        t.set_webhooks([])
        assert "webhooks" not in stack.trial_info(t.namespace)
        t.set_webhooks([{"provider": "mailgun", "url": "https://127.0.0.1:9/mg"}])
        assert [h["provider"] for h in stack.trial_info(t.namespace)["webhooks"]] == ["mailgun"]
        counts = [e.get("count", 0) for e in t.events() if e["action"] == "webhooks"]
        assert counts == [2, 0, 1]
        assert not any("hookpass" in str(e) for e in t.events())


def test_invalid_webhooks_are_refused_whole(stack: Stack) -> None:
    with pytest.raises(Refused) as refused:
        stack.open_trial(webhooks=[{"provider": "resend", "url": "http://127.0.0.1:9/"}, {"provider": "resend", "url": "file:///etc/passwd"}])
    assert refused.value.code == "invalid_webhooks"
    assert refused.value.message.endswith(": webhooks[1]: url must be http:// or https://")
    with stack.open_trial(webhooks=[{"provider": "sendgrid", "url": "http://127.0.0.1:9/"}]) as t:
        with pytest.raises(Refused) as refused:
            t.set_webhooks([{"provider": "sparkpost", "url": "http://127.0.0.1:9/"}])
        assert refused.value.code == "invalid_webhooks"
        assert [h["provider"] for h in stack.trial_info(t.namespace)["webhooks"]] == ["sendgrid"]


# -- deliveries to real endpoints -------------------------------------------

import hashlib  # noqa: E402
import hmac  # noqa: E402
import http.server  # noqa: E402
import json  # noqa: E402
import smtplib  # noqa: E402
import threading  # noqa: E402
import urllib.request  # noqa: E402
from typing import Any, Dict, Iterator, List, Tuple  # noqa: E402

from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

from conftest import recording_server, send, wait_until  # noqa: E402
from mailplane import Trial  # noqa: E402


class Endpoint:
    """A real HTTP endpoint on 127.0.0.1 that keeps every POST, answering
    each with the next of ``statuses`` (then 200)."""

    def __init__(self, statuses: Tuple[int, ...] = ()) -> None:
        self.got: List[Tuple[str, Dict[str, str], bytes]] = []
        self.statuses = list(statuses)
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(outer.statuses.pop(0) if outer.statuses else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def bodies(self, path: str) -> List[Any]:
        return [json.loads(b) for p, _, b in self.got if p == path]


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    e = Endpoint()
    yield e
    e.close()


def svix_ok(secret: str, headers: Dict[str, str], body: bytes) -> bool:
    key = base64.b64decode(secret[len("whsec_") :])
    signed = f"{headers['svix-id']}.{headers['svix-timestamp']}.".encode() + body
    want = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return headers["svix-signature"] == "v1," + want


def sendgrid_ok(public_key: str, headers: Dict[str, str], body: bytes) -> bool:
    key = serialization.load_der_public_key(base64.b64decode(public_key))
    assert isinstance(key, ec.EllipticCurvePublicKey)
    payload = headers["x-twilio-email-event-webhook-timestamp"].encode() + body
    try:
        key.verify(base64.b64decode(headers["x-twilio-email-event-webhook-signature"]), payload, ec.ECDSA(hashes.SHA256()))
        return True
    except Exception:
        return False


def mailgun_ok(key: str, body: Dict[str, Any]) -> bool:
    s = body["signature"]
    want = hmac.new(key.encode(), (s["timestamp"] + s["token"]).encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, s["signature"])


def open_and_click(t: Trial, seq: int = 1, link: int = 0) -> None:
    """The agent opens message seq in its inbox and its browser pings link."""
    assert t.inbox_url
    urllib.request.urlopen(f"{t.inbox_url}/messages/{seq}", timeout=10).read()
    req = urllib.request.Request(f"{t.inbox_url}/messages/{seq}/ping/{link}", data=b"PING", headers={"Content-Type": "text/ping"}, method="POST")
    assert urllib.request.urlopen(req, timeout=10).status == 204


def api(t: Trial, provider: str, to: str, subject: str) -> str:
    """Sends through a provider's API as its SDK would; returns the id the
    provider's answer names."""
    p = t.providers[provider]
    sender = t.candidate_environment["WEBSITEBENCH_MAIL_FROM"]
    html = '<p>Hi, <a href="https://site.example/verify?t=1">verify</a></p>'
    if provider == "sendgrid":
        body = {"personalizations": [{"to": [{"email": to}]}], "from": {"email": sender}, "subject": subject,
                "content": [{"type": "text/html", "value": html}]}
        req = urllib.request.Request(p["base_url"] + "/v3/mail/send", data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": "Bearer " + p["api_key"], "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.headers["X-Message-Id"]
    if provider == "postmark":
        body = {"From": sender, "To": to, "Subject": subject, "HtmlBody": html}
        req = urllib.request.Request(p["base_url"] + "/email", data=json.dumps(body).encode(), method="POST",
                                     headers={"X-Postmark-Server-Token": p["server_token"], "Content-Type": "application/json", "Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return str(json.load(r)["MessageID"])
    if provider == "mailgun":
        form = urllib.parse.urlencode({"from": sender, "to": to, "subject": subject, "html": html}).encode()
        auth = base64.b64encode(("api:" + p["api_key"]).encode()).decode()
        domain = sender.split("@")[1]
        req = urllib.request.Request(p["base_url"] + f"/v3/{domain}/messages", data=form, method="POST", headers={"Authorization": "Basic " + auth})
        with urllib.request.urlopen(req, timeout=10) as r:
            return str(json.load(r)["id"])
    env = t.candidate_environment
    body = {"from": sender, "to": [to], "subject": subject, "html": html}
    req = urllib.request.Request(env["WEBSITEBENCH_MAIL_API_URL"], data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + env["WEBSITEBENCH_MAIL_API_TOKEN"], "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return str(json.load(r)["id"])


import urllib.parse  # noqa: E402


def gateway_webhooks(t: Trial) -> List[Dict[str, Any]]:
    req = urllib.request.Request(f"{t.api_url}/api/namespaces/{t.namespace}/webhooks", headers={"Authorization": "Bearer " + t.read_capability})
    with urllib.request.urlopen(req, timeout=10) as r:
        return list(json.load(r)["webhooks"])


def test_each_provider_send_open_click(stack: Stack, endpoint: Endpoint) -> None:
    """A send through each API, then the agent's open and click: each
    provider's endpoint gets the events in order, signed, with the id the
    send was answered."""
    u = endpoint.url
    hooks = [{"provider": "resend", "url": u + "/resend"}, {"provider": "sendgrid", "url": u + "/sendgrid"},
             {"provider": "mailgun", "url": u + "/mailgun"}, {"provider": "postmark", "url": "http://pm:s3cret@" + u[len("http://"):] + "/postmark"}]
    for n, provider in enumerate(["resend", "sendgrid", "mailgun", "postmark"]):
        with stack.open_trial(webhooks=[hooks[n]]) as t:
            answered = api(t, provider, "agent@example.com", f"via {provider}")
            open_and_click(t)
            want = {"resend": 4, "sendgrid": 4, "mailgun": 4, "postmark": 3}[provider]
            path = "/" + provider
            assert wait_until(lambda: len(endpoint.bodies(path)) >= want, 15), endpoint.bodies(path)
            got = [(h, b) for p, h, b in endpoint.got if p == path]
            p = t.providers
            if provider == "resend":
                assert [json.loads(b)["type"] for _, b in got] == ["email.sent", "email.delivered", "email.opened", "email.clicked"]
                assert all(svix_ok(p["resend"]["webhook_secret"], h, b) for h, b in got)
                assert {json.loads(b)["data"]["email_id"] for _, b in got} == {answered}
                assert json.loads(got[3][1])["data"]["click"]["link"] == "https://site.example/verify?t=1"
            elif provider == "sendgrid":
                assert [json.loads(b)[0]["event"] for _, b in got] == ["processed", "delivered", "open", "click"]
                assert all(sendgrid_ok(p["sendgrid"]["webhook_public_key"], h, b) for h, b in got)
                assert {json.loads(b)[0]["sg_message_id"] for _, b in got} == {answered}
            elif provider == "mailgun":
                bodies = [json.loads(b) for _, b in got]
                assert [b["event-data"]["event"] for b in bodies] == ["accepted", "delivered", "opened", "clicked"]
                assert all(mailgun_ok(p["mailgun"]["webhook_signing_key"], b) for b in bodies)
                assert {"<" + b["event-data"]["message"]["headers"]["message-id"] + ">" for b in bodies} == {answered}
            else:
                assert [json.loads(b)["RecordType"] for _, b in got] == ["Delivery", "Open", "Click"]
                assert all(h["authorization"] == "Basic " + base64.b64encode(b"pm:s3cret").decode() for h, _ in got)
                assert {json.loads(b)["MessageID"] for _, b in got} == {answered}
            # Every attempt is on the trail, without the URL's credentials.
            assert wait_until(lambda: len([e for e in t.events() if e["action"] == "webhook"]) >= want, 10)
            attempts = [e for e in t.events() if e["action"] == "webhook"]
            assert len(attempts) == want and all(e["webhook"]["status"] == 200 and e["webhook"]["state"] == "delivered" for e in attempts)
            assert not any("s3cret" in json.dumps(e) for e in t.events())


def test_bounces_and_complaints(stack: Stack, endpoint: Endpoint) -> None:
    with stack.open_trial(webhooks=[{"provider": "resend", "url": endpoint.url + "/r"}],
                          faults=[{"door": "http", "sends": [3], "do": "bounce"}]) as t:
        send(t, "bounced+signup@resend.dev", subject="resend bounce")
        send(t, "bounce@simulator.amazonses.com", subject="ses bounce")
        send(t, "agent@example.com", subject="fault bounce")
        send(t, "complained@resend.dev", subject="complaint")
        assert wait_until(lambda: len(endpoint.bodies("/r")) >= 9, 15), endpoint.bodies("/r")
        # Each send's events in order (different sends' may interleave).
        by_send: Dict[str, List[Tuple[str, List[str]]]] = {}
        for b in endpoint.bodies("/r"):
            by_send.setdefault(b["data"]["email_id"], []).append((b["type"], b["data"]["to"]))
        assert sorted(by_send.values()) == sorted([
            [("email.sent", ["bounced+signup@resend.dev"]), ("email.bounced", ["bounced+signup@resend.dev"])],
            [("email.sent", ["bounce@simulator.amazonses.com"]), ("email.bounced", ["bounce@simulator.amazonses.com"])],
            [("email.sent", ["agent@example.com"]), ("email.bounced", ["agent@example.com"])],
            [("email.sent", ["complained@resend.dev"]), ("email.delivered", ["complained@resend.dev"]), ("email.complained", ["complained@resend.dev"])],
        ])
        # A bounced mail is accepted and never shown; a complained one is.
        assert [m.subject for m in t.messages()] == ["complaint"]


def post_json(url: str, body: Dict[str, Any], headers: Dict[str, str]) -> Dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(json.load(r))


def test_subject_tags_and_each_recipient(stack: Stack, endpoint: Endpoint) -> None:
    """Events carry the send's subject and its provider's tags, read from
    the stored message; Mailgun and Postmark get one event per recipient,
    SendGrid one list entry per recipient."""
    u = endpoint.url
    hooks = [{"provider": p, "url": u + "/" + p} for p in ("resend", "sendgrid", "mailgun")]
    hooks.append({"provider": "postmark", "url": "http://pm:s3cret@" + u[len("http://"):] + "/postmark"})
    to = ["a@example.com", "b@example.com"]
    with stack.open_trial(webhooks=hooks) as t:
        env, p = t.candidate_environment, t.providers
        sender = env["WEBSITEBENCH_MAIL_FROM"]
        rid = str(post_json(env["WEBSITEBENCH_MAIL_API_URL"],
                            {"from": sender, "to": to, "subject": "Welcome aboard", "text": "hi", "tags": [{"name": "category", "value": "welcome"}]},
                            {"Authorization": "Bearer " + env["WEBSITEBENCH_MAIL_API_TOKEN"]})["id"])
        pid = str(post_json(p["postmark"]["base_url"] + "/email",
                            {"From": sender, "To": ", ".join(to), "Subject": "Your receipt", "TextBody": "hi", "Tag": "receipt", "Metadata": {"order": "43"}},
                            {"X-Postmark-Server-Token": p["postmark"]["server_token"], "Accept": "application/json"})["MessageID"])
        # Two sends to two recipients: Resend 2 x (sent, delivered); SendGrid
        # as many lists of two; Mailgun and Postmark one POST per recipient.
        want = {"/resend": 4, "/sendgrid": 4, "/mailgun": 8, "/postmark": 4}
        assert wait_until(lambda: all(len(endpoint.bodies(k)) >= n for k, n in want.items()), 20), endpoint.got
        subject = {rid: "Welcome aboard", pid: "Your receipt"}

        resend = endpoint.bodies("/resend")
        assert sorted((b["data"]["email_id"], b["type"]) for b in resend) == sorted(
            (i, k) for i in (rid, pid) for k in ("email.sent", "email.delivered"))
        for b in resend:
            assert b["data"]["subject"] == subject[b["data"]["email_id"]] and b["data"]["to"] == to
            assert b["data"]["tags"] == ({"category": "welcome"} if b["data"]["email_id"] == rid else {})

        for h, b in [(h, b) for path, h, b in endpoint.got if path == "/sendgrid"]:
            assert sendgrid_ok(p["sendgrid"]["webhook_public_key"], h, b)
            assert [e["email"] for e in json.loads(b)] == to

        mailgun = endpoint.bodies("/mailgun")
        assert all(mailgun_ok(p["mailgun"]["webhook_signing_key"], b) for b in mailgun)
        got = sorted((b["event-data"]["message"]["headers"]["message-id"].split("@")[0], b["event-data"]["event"], b["event-data"]["recipient"]) for b in mailgun)
        assert got == sorted((i, k, r) for i in (rid, pid) for k in ("accepted", "delivered") for r in to)
        assert len({b["event-data"]["id"] for b in mailgun}) == 8
        assert all(b["event-data"]["message"]["headers"]["subject"] == subject[b["event-data"]["message"]["headers"]["message-id"].split("@")[0]] for b in mailgun)

        postmark = endpoint.bodies("/postmark")
        assert sorted((b["MessageID"], b["RecordType"], b["Recipient"]) for b in postmark) == sorted((i, "Delivery", r) for i in (rid, pid) for r in to)
        for b in postmark:
            assert (b["Tag"], b["Metadata"]) == (("receipt", {"order": "43"}) if b["MessageID"] == pid else ("", {}))
        # Nothing of the content is on the trail.
        assert not any("Welcome aboard" in json.dumps(e) or "welcome" in json.dumps(e) for e in t.events())


def test_delayed_send_to_simulators(stack: Stack, endpoint: Endpoint) -> None:
    """A delayed send's recipients are reported when it shows, as an
    undelayed send's: delivered, then the complaint simulator's complaint
    and the bounce simulator's bounce; its subject is the message's."""
    with stack.open_trial(webhooks=[{"provider": "resend", "url": endpoint.url + "/r"}],
                          faults=[{"door": "http", "sends": [1], "do": "delay", "seconds": 1}]) as t:
        env = t.candidate_environment
        to = ["agent@example.com", "complained@resend.dev", "bounced@resend.dev"]
        sid = str(post_json(env["WEBSITEBENCH_MAIL_API_URL"], {"from": env["WEBSITEBENCH_MAIL_FROM"], "to": to, "subject": "late", "text": "hi"},
                            {"Authorization": "Bearer " + env["WEBSITEBENCH_MAIL_API_TOKEN"]})["id"])
        assert wait_until(lambda: len(endpoint.bodies("/r")) >= 4, 20), endpoint.bodies("/r")
        got = [(b["type"], b["data"]["to"]) for b in endpoint.bodies("/r")]
        assert got == [("email.sent", to), ("email.delivered", to), ("email.complained", ["complained@resend.dev"]),
                       ("email.bounced", ["bounced@resend.dev"])]
        assert all(b["data"]["email_id"] == sid for b in endpoint.bodies("/r"))
        assert [b["data"]["subject"] for b in endpoint.bodies("/r")[1:]] == ["late"] * 3


def test_retries_same_event_id(stack: Stack) -> None:
    failing = Endpoint(statuses=(500, 500))
    try:
        with stack.open_trial(webhooks=[{"provider": "resend", "url": failing.url + "/r", "retry_seconds": [0, 1]}]) as t:
            send(t, "agent@example.com")
            assert wait_until(lambda: len(failing.got) >= 4, 15)
            ids = [h["svix-id"] for _, h, _ in failing.got]
            assert ids[0] == ids[1] == ids[2] != ids[3]  # email.sent three times, then email.delivered
            assert wait_until(lambda: len([e for e in t.events() if e["action"] == "webhook"]) >= 3, 10)
            attempts = [e["webhook"] for e in t.events() if e["action"] == "webhook"]
            assert [(a["attempt"], a.get("status"), a["state"]) for a in attempts[:3]] == [(1, 500, "pending"), (2, 500, "pending"), (3, 200, "delivered")]
            # The evaluator's view: the gateway lists each event with every
            # attempt (the last one's report may trail its arrival).
            assert wait_until(lambda: [w["state"] for w in gateway_webhooks(t)] == ["delivered", "delivered"], 10)
            listed = gateway_webhooks(t)
            assert [(w["kind"], w["state"], w["provider"]) for w in listed] == [("sent", "delivered", "resend"), ("delivered", "delivered", "resend")]
            assert listed[0]["event_id"] == ids[0][len("msg_") :]
            assert [a.get("status") for a in listed[0]["attempts"]] == [500, 500, 200]
            # The operator's console shows them on the trial's page.
            assert stack.console_url and stack._admin_grant_file
            grant = open(stack._admin_grant_file).read().strip()
            req = urllib.request.Request(f"{stack.console_url}/trials/{t.namespace}", headers={"Authorization": "Bearer " + grant})
            page = urllib.request.urlopen(req, timeout=10).read().decode()
            assert "<h2>Webhooks</h2>" in page and listed[0]["event_id"] in page and "A webhook delivery failed" in page
    finally:
        failing.close()


def test_webhook_faults_and_isolation(stack: Stack) -> None:
    a, b, quiet = Endpoint(), Endpoint(), Endpoint()
    try:
        with stack.open_trial(webhooks=[{"provider": "sendgrid", "url": a.url + "/a"}],
                              faults=[{"door": "webhook", "sends": [1], "do": "duplicate"}, {"door": "webhook", "sends": [2], "do": "drop"}]) as ta, \
                stack.open_trial(webhooks=[{"provider": "sendgrid", "url": b.url + "/b"}]) as tb, stack.open_trial() as tq:
            id_a = send(ta, "agent@example.com")
            id_b = send(tb, "agent@example.com")
            send(tq, "agent@example.com")
            assert wait_until(lambda: len(a.got) >= 2 and len(b.got) >= 2, 15)
            # The duplicate: the same event twice; the drop: never sent.
            assert [json.loads(x)[0]["event"] for _, _, x in a.got] == ["processed", "processed"]
            assert a.got[0][2] != b"" and json.loads(a.got[0][2])[0]["sg_event_id"] == json.loads(a.got[1][2])[0]["sg_event_id"]
            # Each trial's events go to its own URL only, naming its own send.
            assert {json.loads(x)[0]["sg_message_id"] for _, _, x in a.got} == {id_a}
            assert {json.loads(x)[0]["sg_message_id"] for _, _, x in b.got} == {id_b}
            assert [json.loads(x)[0]["event"] for _, _, x in b.got] == ["processed", "delivered"]
            assert not any(p != "/a" for p, _, _ in a.got) and not any(p != "/b" for p, _, _ in b.got)
            assert quiet.got == []
            assert wait_until(lambda: [w["state"] for w in gateway_webhooks(ta)] == ["delivered", "delivered", "dropped"], 10)
            listed = gateway_webhooks(ta)
            assert [(w["kind"], w["state"]) for w in listed] == [("sent", "delivered"), ("sent", "delivered"), ("delivered", "dropped")]
            assert gateway_webhooks(tq) == []
            assert [e for e in tq.events() if e["action"] == "webhook"] == []
    finally:
        for e in (a, b, quiet):
            e.close()


def test_netns_candidate_gets_its_webhooks_on_its_loopback(stack: Stack, endpoint: Endpoint) -> None:
    """A netns trial's webhook URL names the candidate's own loopback: the
    event is delivered there, inside its namespace, and not to the host's
    listener on the same port."""
    import os
    import shutil
    import subprocess
    import tempfile

    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("a network namespace of its own needs root and ip")
    name = f"mpt-hook-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    out = tempfile.NamedTemporaryFile(delete=False)
    server = recording_server(endpoint.server.server_port)
    proc = None
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True, timeout=30)
        proc = subprocess.Popen(["ip", "netns", "exec", name, "/usr/bin/python3", "-c", server, out.name])
        # The same port on the host's loopback is the test's endpoint: it must get nothing.
        url = f"http://localhost:{endpoint.server.server_port}/inside"
        with stack.open_trial(netns=f"/run/netns/{name}", webhooks=[{"provider": "resend", "url": url, "retry_seconds": [0, 1, 1, 1]}]) as t:
            env = t.candidate_environment
            script = (
                "import json, os, urllib.request\n"
                "body = json.dumps({'from': os.environ['WEBSITEBENCH_MAIL_FROM'], 'to': ['ns@example.com'], 'subject': 'in netns', 'text': 'hi'}).encode()\n"
                "req = urllib.request.Request(os.environ['WEBSITEBENCH_MAIL_API_URL'], data=body, method='POST', headers={'Content-Type': 'application/json', 'Authorization': 'Bearer ' + os.environ['WEBSITEBENCH_MAIL_API_TOKEN']})\n"
                "print(json.load(urllib.request.urlopen(req, timeout=10))['id'])\n"
            )
            sent = subprocess.run(["ip", "netns", "exec", name, "/usr/bin/python3", "-c", script],
                                  env={"PATH": "/usr/bin:/bin", **env}, check=True, timeout=60, capture_output=True, text=True).stdout.strip()

            def got() -> List[Any]:
                with open(out.name, "rb") as f:
                    return [json.loads(line) for line in f.read().splitlines() if line]

            assert wait_until(lambda: len(got()) >= 2, 20), [e.get("webhook") for e in t.events() if e["action"] == "webhook"]
            assert [(e["type"], e["data"]["email_id"]) for e in got()[:2]] == [("email.sent", sent), ("email.delivered", sent)]
            assert endpoint.got == []
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        subprocess.run(["ip", "netns", "del", name], timeout=30)
        os.unlink(out.name)
