"""A candidate inside its network namespace, as TestNetnsDoors runs it
(ip netns exec NAME setpriv --reuid 65534 ...): it sends by plain SMTP
and by POST /emails to the addresses its WEBSITEBENCH_* environment
names (with "tls", by STARTTLS and implicit TLS too, verifying the CA
file the environment names), asks its bootstrap, tries to connect to each of the addresses it
is given, and to the plane's Unix socket, and prints what happened as
one JSON object."""

import errno
import json
import os
import smtplib
import socket
import ssl
import sys
import urllib.error
import urllib.request

args = json.loads(sys.argv[1])
env = os.environ
out = {"uid": os.getuid()}
http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def reason(e: OSError) -> str:
    return errno.errorcode.get(e.errno or 0, repr(e))


subject = args.get("subject")
if subject:
    try:
        with smtplib.SMTP(env["WEBSITEBENCH_SMTP_HOST"], int(env["WEBSITEBENCH_SMTP_PORT"]), timeout=20) as c:
            c.sendmail(env["WEBSITEBENCH_SMTP_FROM"], ["agent@example.com"],
                       f"Subject: smtp {subject}\r\n\r\nYour code is 123456\r\n")
        out["smtp"] = "ok"
    except Exception as e:  # the test prints it
        out["smtp"] = repr(e)
    body = json.dumps({"from": env["WEBSITEBENCH_MAIL_FROM"], "to": "agent@example.com",
                       "subject": f"http {subject}", "text": "Your code is 654321"}).encode()
    req = urllib.request.Request(env["WEBSITEBENCH_MAIL_API_URL"], data=body, method="POST", headers={
        "Authorization": "Bearer " + env["WEBSITEBENCH_MAIL_API_TOKEN"], "Content-Type": "application/json"})
    try:
        with http.open(req, timeout=20) as r:
            out["http"] = r.status
    except urllib.error.HTTPError as e:
        out["http"] = e.code
    except Exception as e:
        out["http"] = repr(e)
    if args.get("tls"):  # as a framework configured from the environment: verifying, on both TLS doors
        try:
            ctx = ssl.create_default_context(cafile=env["WEBSITEBENCH_SMTP_CA_FILE"])
            msg = f"Subject: tls %s {subject}\r\n\r\nYour code is 987654\r\n"
            with smtplib.SMTP(env["WEBSITEBENCH_SMTP_HOST"], int(env["WEBSITEBENCH_SMTP_PORT"]), timeout=20) as c:
                c.starttls(context=ctx)
                c.sendmail(env["WEBSITEBENCH_SMTP_FROM"], ["agent@example.com"], msg % "starttls")
            with smtplib.SMTP_SSL(env["WEBSITEBENCH_SMTP_HOST"], int(env["WEBSITEBENCH_SMTP_TLS_PORT"]), timeout=20, context=ctx) as c:
                c.sendmail(env["WEBSITEBENCH_SMTP_FROM"], ["agent@example.com"], msg % "implicit")
            out["tls"] = "ok"
        except Exception as e:
            out["tls"] = repr(e)
    req = urllib.request.Request(env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL"], headers={
        "Authorization": "Bearer " + env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"]})
    try:
        with http.open(req, timeout=20) as r:
            out["bootstrap"] = json.load(r)
    except Exception as e:
        out["bootstrap"] = repr(e)

dial = {}
for host, port in args.get("dial", []):
    try:
        socket.create_connection((host, port), timeout=5).close()
        dial[f"{host}:{port}"] = "connected"
    except OSError as e:
        dial[f"{host}:{port}"] = reason(e)
out["dial"] = dial

hold = args.get("hold")
if hold:  # [port, n]: n sessions held, then one more, which the cap closes at once
    held = []
    for _ in range(hold[1]):
        c = socket.create_connection(("127.0.0.1", hold[0]), timeout=10)
        held.append((c, c.makefile("rb").readline()))
    out["held"] = sum(1 for _, greeting in held if greeting.startswith(b"220"))
    extra = socket.create_connection(("127.0.0.1", hold[0]), timeout=10)
    try:
        out["over_cap"] = extra.recv(64).decode(errors="replace")
    except OSError as e:
        out["over_cap"] = reason(e)
    extra.close()
    for c, _ in held:
        c.close()

if args.get("socket"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(args["socket"])
        out["socket"] = "connected"
    except OSError as e:
        out["socket"] = reason(e)
    finally:
        s.close()
print(json.dumps(out))
