"""Trial.inbox_imap: the agent's mailbox as an imaplib account, exactly as
docs/agent.md configures it."""

from __future__ import annotations

import imaplib
import json
import os
import shutil
import ssl
import subprocess

import pytest

from conftest import send
from mailplane import Refused, Stack


def test_inbox_imap_reads_the_trials_mail(stack: Stack) -> None:
    with stack.open_trial() as t:
        acct = t.inbox_imap
        assert acct is not None and acct["password"] == t.inbox_url.rsplit("/inbox/", 1)[1]  # type: ignore[union-attr]
        assert acct["password"] not in repr(t)
        send(t, "agent@example.com", "Over IMAP", "Your code is 135790.")
        ctx = ssl.create_default_context(cafile=acct["ca_file"])
        with imaplib.IMAP4_SSL(acct["host"], acct["tls_port"], ssl_context=ctx, timeout=30) as m:
            m.login(acct["username"], acct["password"])
            assert m.select("INBOX", readonly=True) == ("OK", [b"1"])
            typ, data = m.fetch("1", "(BODY.PEEK[])")
            assert typ == "OK" and b"Subject: Over IMAP" in data[0][1] and b"Your code is 135790." in data[0][1]
        opens = [e for e in t.events() if e["action"] == "open" and e["door"] == "imap"]
        assert [e["message_ids"] for e in opens] == [[1]]


def test_agent_netns_takes_plain_login_inside_the_namespace(stack: Stack) -> None:
    """agent_netns= binds the trial's IMAP door inside the agent's network
    namespace, where imaplib logs in without TLS; a path that is no network
    namespace is refused."""
    with pytest.raises(Refused) as e:
        stack.open_trial(agent_netns="/nonexistent/netns")
    assert e.value.code == "bad_request"
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("a network namespace of its own needs root and ip")
    name = f"mpt-pyagent-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        with stack.open_trial(agent_netns=f"/run/netns/{name}") as t:
            acct = t.inbox_imap
            assert acct is not None and acct["plain_login"] and acct["host"] == "127.0.0.1" and acct["tls_port"] == 0
            send(t, "agent@example.com", "In the agent's namespace", "Your code is 864209.")
            script = (
                "import imaplib, json, sys\n"
                "a = json.loads(sys.argv[1])\n"
                "with imaplib.IMAP4(a['host'], a['port'], timeout=30) as m:\n"
                "    m.login(a['username'], a['password'])\n"
                "    m.select('INBOX', readonly=True)\n"
                "    sys.stdout.buffer.write(m.fetch('1', '(BODY.PEEK[])')[1][0][1])\n"
            )
            out = subprocess.run(["ip", "netns", "exec", name, "/usr/bin/python3", "-c", script, json.dumps(acct)],
                                 capture_output=True, check=True, timeout=60).stdout
            assert b"Subject: In the agent's namespace" in out and b"Your code is 864209." in out
    finally:
        subprocess.run(["ip", "netns", "del", name], timeout=30)
