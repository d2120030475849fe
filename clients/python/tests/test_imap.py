"""Trial.inbox_imap: the agent's mailbox as an imaplib account, exactly as
docs/agent.md configures it."""

from __future__ import annotations

import imaplib
import ssl

from conftest import send
from mailplane import Stack


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
