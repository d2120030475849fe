# The agent's mail client in the IMAP tests: Python's imaplib, configured
# from a bundle's inbox_imap (argv[2], JSON), doing what argv[1] names and
# printing one JSON object. The Go test decides what it must have seen.
import imaplib
import json
import ssl
import sys

mode, acct = sys.argv[1], json.loads(sys.argv[2])
ctx = ssl.create_default_context(cafile=acct.get("ca_file"))  # verifies host and chain (no CA: a door without TLS)


def starttls():
    m = imaplib.IMAP4(acct["host"], acct["port"], timeout=30)
    m.starttls(ssl_context=ctx)
    return m


def implicit():
    return imaplib.IMAP4_SSL(acct["host"], acct["tls_port"], ssl_context=ctx, timeout=30)


def status(call):
    try:
        typ, data = call()
        return [typ, [d.decode() if isinstance(d, bytes) else str(d) for d in data]]
    except imaplib.IMAP4.abort as e:
        return ["abort", [str(e)]]
    except imaplib.IMAP4.error as e:
        return ["error", [str(e)]]


def read(m, plain=False):
    # LOGIN, or AUTHENTICATE PLAIN (SASL: authzid, authcid, password).
    sasl = ("\0" + acct["username"] + "\0" + acct["password"]).encode()
    login = (lambda: m.authenticate("PLAIN", lambda _: sasl)) if plain else (lambda: m.login(acct["username"], acct["password"]))
    out = {"login": status(login)}
    out["status"] = status(lambda: m.status("INBOX", "(MESSAGES UIDNEXT UIDVALIDITY UNSEEN)"))
    out["select"] = status(lambda: m.select("INBOX"))
    out["uids"] = status(lambda: m.uid("SEARCH", "ALL"))
    typ, ids = m.search(None, "ALL")
    out["ids"] = ids[0].decode().split()
    out["messages"] = []
    for n in out["ids"]:
        typ, data = m.fetch(n, "(UID FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
        before = data[0][0].decode()
        typ, data = m.fetch(n, "(BODY[])")
        typ, flags = m.fetch(n, "(FLAGS)")
        out["messages"].append({"before": before, "raw": data[0][1].decode("utf-8", "replace"), "after": flags[0].decode()})
    m.logout()
    return out


if mode == "starttls":
    print(json.dumps(read(starttls())))
elif mode == "implicit":
    print(json.dumps(read(implicit(), plain=True)))
elif mode == "plain-login":
    # LOGIN on the STARTTLS port before STARTTLS.
    m = imaplib.IMAP4(acct["host"], acct["port"], timeout=30)
    print(json.dumps({"capabilities": list(m.capabilities),
                      "login": status(lambda: m.login(acct["username"], acct["password"]))}))
elif mode == "wrong":
    m = implicit()
    tries = [status(lambda: m.login(acct["username"], "x" * 43)) for _ in range(3)]
    print(json.dumps({"tries": tries, "after": status(m.noop)}))
elif mode == "refused":
    m = implicit()
    m.login(acct["username"], acct["password"])
    m.select("INBOX")
    out = {
        "store_deleted": status(lambda: m.store("1", "+FLAGS", "(\\Deleted)")),
        "store_flagged": status(lambda: m.store("1", "+FLAGS", "(\\Flagged)")),
        "store_answered": status(lambda: m.store("1", "+FLAGS", "(\\Answered)")),
        "expunge": status(m.expunge),
        "append": status(lambda: m.append("INBOX", None, None, b"Subject: planted by the agent\r\n\r\nhi\r\n")),
        "copy": status(lambda: m.copy("1", "INBOX")),
        "create": status(lambda: m.create("Archive")),
    }
    out["ids"] = m.search(None, "ALL")[1][0].decode().split()
    out["examine_other"] = status(lambda: m.select("Archive", readonly=True))
    print(json.dumps(out))
elif mode == "idle":
    # IDLE, say so on stdout, then wait for EXISTS (or the connection's end).
    m = implicit()
    m.login(acct["username"], acct["password"])
    had = int(m.select("INBOX")[1][0])
    tag = m._new_tag()
    m.send(tag + b" IDLE\r\n")
    cont = m.readline()
    print(json.dumps({"idling": cont.decode().strip()}), flush=True)
    seen = []
    while True:
        try:
            line = m.readline()
        except Exception as e:  # the connection was ended
            seen.append("error: " + type(e).__name__)
            break
        if not line:
            seen.append("closed")
            break
        seen.append(line.decode().strip())
        # An EXISTS may repeat what SELECT said: wait for more mail.
        if line.endswith(b"EXISTS\r\n") and int(line.split()[1]) > had:
            m.send(b"DONE\r\n")
            seen.append(m.readline().decode().strip())
            break
    print(json.dumps({"seen": seen}), flush=True)
    if seen[-1].endswith("OK IDLE completed"):
        m.logout()
elif mode == "caps":
    # One connection more than a trial may have, then one IDLE more.
    lim = json.loads(sys.argv[3])
    conns, logins = [], []
    for _ in range(lim["conns"] + 1):
        m = implicit()
        logins.append(status(lambda: m.login(acct["username"], acct["password"])))
        conns.append(m)
    idles = []
    for m in [m for m, l in zip(conns, logins) if l[0] == "OK"][: lim["idles"] + 1]:
        m.select("INBOX")
        tag = m._new_tag()
        m.send(tag + b" IDLE\r\n")
        idles.append((m, m.readline().decode().strip()))
    for m, first in idles:
        if first.startswith("+"):
            m.send(b"DONE\r\n")
            m.readline()
    print(json.dumps({"logins": logins, "idles": [first for _, first in idles]}))
elif mode == "login":
    m = implicit()
    print(json.dumps({"login": status(lambda: m.login(acct["username"], acct["password"]))}))
elif mode in ("flags", "mark"):
    m = implicit()
    m.login(acct["username"], acct["password"])
    m.select("INBOX")
    if mode == "mark":  # \Seen on the newest message, by STORE alone
        last = m.search(None, "ALL")[1][0].decode().split()[-1]
        m.store(last, "+FLAGS.SILENT", "(\\Seen)")
    print(json.dumps({"flags": [m.fetch(n, "(FLAGS)")[1][0].decode() for n in m.search(None, "ALL")[1][0].decode().split()],
                      "uidvalidity": m.response("UIDVALIDITY")[1][0].decode()}))
    m.logout()
elif mode == "door":
    # The agent's door inside its network namespace: LOGIN without TLS.
    m = imaplib.IMAP4(acct["host"], acct["port"], timeout=30)
    caps = [c.decode() if isinstance(c, bytes) else c for c in m.capabilities]
    out = read(m)
    out["capabilities"] = caps
    print(json.dumps(out))
elif mode == "door-login":
    m = imaplib.IMAP4(acct["host"], acct["port"], timeout=30)
    print(json.dumps({"login": status(lambda: m.login(acct["username"], acct["password"]))}))
