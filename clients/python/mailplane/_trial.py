"""Trial: one namespace of a running stack, read through mail-gateway."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ._errors import MailplaneError, Refused, Timeout, Unavailable
from ._http import gateway_get
from ._message import Message

__all__ = ["Trial"]

# How much longer than its wait one request may take to be answered (as
# pkg/mailclient: wait + 30 s).
_ANSWER_SLACK = 30.0


class Trial:
    """One trial: a namespace, its read capability and, for a trial this
    process opened, the candidate's environment and the agent's inbox URL.

    Reading needs only ``api_url``, ``namespace`` and the read capability;
    build such a Trial in another process with :meth:`Trial.attach`. The
    read capability and the candidate's tokens never appear in ``repr()``
    or in an exception's message.
    """

    #: The longest one waiting request is held by the gateway (its maximum,
    #: 60 s). A longer wait is a loop of such requests.
    max_request_wait: float = 60.0

    def __init__(
        self,
        *,
        api_url: str,
        namespace: str,
        read_capability: str,
        candidate_environment: Optional[Mapping[str, str]] = None,
        inbox_url: Optional[str] = None,
        inbox_mcp_url: Optional[str] = None,
        inbox_imap: Optional[Mapping[str, Any]] = None,
        smtp_port: Optional[int] = None,
        writer_url: Optional[str] = None,
        providers: Optional[Mapping[str, Mapping[str, str]]] = None,
        closer: Optional[Callable[[], None]] = None,
        set_faults: Optional[Callable[[Sequence[Mapping[str, Any]]], None]] = None,
        describe_outage: Optional[Callable[[], str]] = None,
        admin: Optional[Callable[[str, Mapping[str, Any]], Dict[str, Any]]] = None,
    ) -> None:
        if not api_url or not namespace or not read_capability:
            raise MailplaneError("invalid_trial", "a trial needs api_url, namespace and read_capability")
        self._api_url = api_url.rstrip("/")
        self._namespace = namespace
        self._capability = read_capability
        self._env: Dict[str, str] = dict(candidate_environment or {})
        self._inbox_url = inbox_url
        self._inbox_mcp_url = inbox_mcp_url
        self._inbox_imap = dict(inbox_imap) if inbox_imap else None
        self._admin = admin
        self._smtp_port = smtp_port
        self._writer_url = writer_url
        self._providers = {k: dict(v) for k, v in (providers or {}).items()}
        self._closer = closer
        self._set_faults = set_faults
        self._closed = False
        self._describe_outage = describe_outage

    @classmethod
    def attach(cls, *, api_url: str, namespace: str, read_capability: str) -> "Trial":
        """A reading Trial from what an evaluator in another process was
        handed: the gateway's URL, the namespace and its read capability."""
        return cls(api_url=api_url, namespace=namespace, read_capability=read_capability)

    @classmethod
    def _from_bundle(cls, bundle: Mapping[str, Any], **kw: Any) -> "Trial":
        try:
            return cls(
                api_url=str(bundle["api_url"]),
                namespace=str(bundle["namespace"]),
                read_capability=str(bundle["read_capability"]),
                candidate_environment=dict(bundle.get("candidate_environment") or {}),
                inbox_url=bundle.get("inbox_url"),
                inbox_mcp_url=bundle.get("inbox_mcp_url"),
                inbox_imap=bundle.get("inbox_imap"),
                smtp_port=bundle.get("smtp_port"),
                writer_url=bundle.get("writer_url"),
                providers=bundle.get("providers"),
                **kw,
            )
        except KeyError as e:
            raise MailplaneError("invalid_bundle", f"the trial's bundle has no {e.args[0]!r}") from None

    # -- what each party is handed --------------------------------------

    @property
    def api_url(self) -> str:
        """The evaluator's API (mail-gateway) base URL."""
        return self._api_url

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def read_capability(self) -> str:
        """The evaluator's secret: hand it only to an evaluator."""
        return self._capability

    @property
    def candidate_environment(self) -> Dict[str, str]:
        """The candidate's ``WEBSITEBENCH_*`` variables (a copy): hand them
        to the website under test. Empty for an attached trial."""
        return dict(self._env)

    @property
    def inbox_url(self) -> Optional[str]:
        """The agent's inbox (plain HTML, no credential needed)."""
        return self._inbox_url

    @property
    def inbox_mcp_url(self) -> Optional[str]:
        """The same mailbox as an MCP server (streamable HTTP), with the
        same rules: no code or link is extracted for the agent."""
        return self._inbox_mcp_url

    @property
    def inbox_imap(self) -> Optional[Dict[str, Any]]:
        """The same mailbox over IMAP, as a mail client's account (a copy):
        ``{"host", "port" (STARTTLS), "tls_port" (implicit TLS),
        "username", "password" (the inbox token), "ca_file"}``; for a trial
        opened with ``agent_netns``, ``{"host", "port", "username",
        "password", "plain_login": True}``: a door inside the agent's
        network namespace, without TLS. None where the stack's inbox serves
        no IMAP. Hand it to the agent only."""
        return dict(self._inbox_imap) if self._inbox_imap else None

    @property
    def smtp_port(self) -> Optional[int]:
        return self._smtp_port

    @property
    def writer_url(self) -> Optional[str]:
        return self._writer_url

    @property
    def providers(self) -> Dict[str, Dict[str, str]]:
        """The candidate's coordinates for the writer's SendGrid, Postmark,
        Mailgun and SES APIs (a copy): ``{"sendgrid": {"base_url",
        "api_key"}, "postmark": {"base_url", "server_token"}, "mailgun":
        {"base_url", "api_key"}, "ses": {"endpoint", "region",
        "access_key_id", "secret_access_key"}}``. Hand them to the website
        under test with its other secrets. Empty for an attached trial."""
        return {k: dict(v) for k, v in self._providers.items()}

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<mailplane.Trial {self._namespace} api_url={self._api_url}{state}>"

    # -- reading --------------------------------------------------------

    def messages(self, recipient: Optional[str] = None, after: Optional[int] = None) -> List[Message]:
        """The trial's messages (to ``recipient``, with an id greater than
        ``after``), oldest first."""
        obj = self._get("/messages", self._query(recipient, after, None), 0.0)
        return [Message.from_json(m) for m in _messages_of(obj)]

    def latest(self, recipient: Optional[str] = None, after: Optional[int] = None) -> Optional[Message]:
        """The newest message (to ``recipient``, with an id greater than
        ``after``), or None when there is none."""
        try:
            return Message.from_json(self._get("/messages/latest", self._query(recipient, after, None), 0.0))
        except Refused as e:
            if e.code == "message_not_found":
                return None
            raise

    def get(self, id: int) -> Message:
        """The message with ``id``; Refused with code ``message_not_found``
        when there is none."""
        return Message.from_json(self._get(f"/messages/{int(id)}", {}, 0.0))

    # -- waiting --------------------------------------------------------

    def wait_for_message(
        self, recipient: Optional[str] = None, after: Optional[int] = None, timeout: Optional[float] = 30.0
    ) -> Message:
        """Waits for a message (to ``recipient``, with an id greater than
        ``after``) and returns the newest such message. Raises Timeout
        (code ``timeout``) after ``timeout`` seconds (None: no limit).

        The gateway holds each request until mail arrives (server-side
        ``wait``, nobody polls); a request is held at most
        ``max_request_wait`` seconds, then the next one is sent.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = self._next_wait(deadline, recipient, after, timeout, None)
            started = time.monotonic()
            try:
                obj = self._get("/messages/latest", self._query(recipient, after, wait), wait, recipient)
                return Message.from_json(obj)
            except Refused as e:
                if e.code != "message_not_found":
                    raise
            self._never_tightly(started, wait, deadline)

    def wait_for_code(
        self, recipient: Optional[str] = None, after: Optional[int] = None, timeout: Optional[float] = 30.0
    ) -> str:
        """Waits for a message with a one-time code and returns the code
        (its ``otp``). Messages without a code are passed over; the newest
        message with one wins. Raises Timeout when none arrives in time."""
        m = self._wait_for(lambda m: m.otp is not None, "a one-time code", recipient, after, timeout)
        assert m.otp is not None
        return m.otp

    def wait_for_link(
        self, recipient: Optional[str] = None, after: Optional[int] = None, timeout: Optional[float] = 30.0
    ) -> str:
        """Waits for a message with an action link (the one link a person is
        asked to click: verify, confirm, sign in, reset, invite) and returns
        it. Messages without one are passed over. Raises Timeout when none
        arrives in time; its message says how many messages did arrive and,
        of those with links, the first links, none of which was an action
        link."""
        m = self._wait_for(lambda m: bool(m.action_link), "an action link", recipient, after, timeout, _links_note)
        assert m.action_link is not None
        return m.action_link

    def _wait_for(
        self,
        accept: Callable[[Message], bool],
        what: str,
        recipient: Optional[str],
        after: Optional[int],
        timeout: Optional[float],
        note: Callable[[List[Message]], str] = lambda passed: f"{len(passed)} other message(s) arrived",
    ) -> Message:
        deadline = None if timeout is None else time.monotonic() + timeout
        passed: List[Message] = []
        while True:
            # The note is made only for a timeout: a trial that receives
            # many messages one by one would make it on every wait.
            wait = self._next_wait(deadline, recipient, after, timeout, (what, lambda: note(passed) if passed else ""))
            started = time.monotonic()
            obj = self._get("/messages", self._query(recipient, after, wait), wait, recipient)
            new = [Message.from_json(m) for m in _messages_of(obj)]
            for m in reversed(new):
                if accept(m):
                    return m
            if new:
                # Only what a timeout's note needs is kept of them.
                passed += [Message(id=m.id, links=m.links[: _NOTE_LINKS + 1]) for m in new]
                after = max(m.id for m in new)
            else:
                self._never_tightly(started, wait, deadline)

    def _next_wait(
        self,
        deadline: Optional[float],
        recipient: Optional[str],
        after: Optional[int],
        timeout: Optional[float],
        what: Optional[Tuple[str, Callable[[], str]]],
    ) -> float:
        wait = self.max_request_wait
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
        if wait < 0.001:
            desc = "message" if what is None else f"message with {what[0]}"
            if recipient:
                desc += f" to {recipient}"
            if after:
                desc += f" after id {after}"
            note = what[1]() if what is not None else ""
            extra = f" ({note})" if note else ""
            raise Timeout("timeout", f"no {desc} arrived in {self._namespace} within {timeout:g}s{extra}")
        return wait

    @staticmethod
    def _never_tightly(started: float, wait: float, deadline: Optional[float]) -> None:
        # The gateway answered "nothing" well before the wait it was asked
        # for: never turn that into a tight loop.
        if time.monotonic() - started < wait / 2:
            pause = min(1.0, wait / 2)
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)

    # -- the trail ------------------------------------------------------

    def events(self, after: Optional[int] = None) -> List[Dict[str, Any]]:
        """The trial's trail: every allow, refuse and failure of a call on
        it and each step of its life, with a seq greater than ``after``, in
        order. Each event is a dict: ``seq``, ``time``, ``door``,
        ``action``, ``outcome`` (accepted, refused or failed) and, where
        they apply, ``code``, ``message_ids``, ``to``, ``size``, ``prev``
        and ``hash`` (the chain ``mail-plane evidence verify`` checks)."""
        return _events_of(self._get("/events", self._query(None, after, None), 0.0))

    def wait_for_event(
        self,
        action: Optional[str] = None,
        outcome: Optional[str] = None,
        door: Optional[str] = None,
        after: Optional[int] = None,
        timeout: Optional[float] = 30.0,
    ) -> Dict[str, Any]:
        """Waits for the first event after seq ``after`` with this
        ``action``, ``outcome`` and ``door`` (None: any) and returns it.
        Raises Timeout when none is recorded in time. The gateway holds
        each request until an event commits (nobody polls)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        what = ", ".join(f"{k}={v}" for k, v in (("action", action), ("outcome", outcome), ("door", door)) if v)
        while True:
            wait = self.max_request_wait
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
            if wait < 0.001:
                raise Timeout("timeout", f"no event {what or ''} after seq {after or 0} in {self._namespace} within {timeout:g}s")
            started = time.monotonic()
            new = _events_of(self._get("/events", self._query(None, after, wait), wait))
            for e in new:
                if (action is None or e.get("action") == action) and (outcome is None or e.get("outcome") == outcome) and (
                    door is None or e.get("door") == door
                ):
                    return e
            if new:
                after = max(int(e["seq"]) for e in new)
            else:
                self._never_tightly(started, wait, deadline)

    # -- planting -------------------------------------------------------

    def plant(
        self,
        subject: str,
        text: Optional[str] = None,
        *,
        label: str,
        html: Optional[str] = None,
        from_: Optional[str] = None,
        to: Optional[List[str]] = None,
    ) -> int:
        """Plants labelled mail in this trial (``trial.plant`` on the admin
        RPC) and returns its id: mail the agent's inbox and MCP tools show
        as any other (a stale code, a look-alike), which this client's
        messages show with ``label`` and the trail records with it.
        ``from_`` is an address or ``"Name <address>"`` (default: the
        trial's sender); ``to`` defaults to the latest message's
        recipients. It does not count toward the quota. Only a trial its
        stack opened can plant (MailplaneError ``not_plantable``)."""
        if self._admin is None:
            raise MailplaneError("not_plantable", f"trial {self._namespace} was attached for reading; only its stack can plant mail")
        body: Dict[str, Any] = {"namespace": self._namespace, "subject": subject, "label": label}
        for key, value in (("text", text), ("html", html), ("from", from_)):
            if value is not None:
                body[key] = value
        if to is not None:
            body["to"] = list(to)
        return int(self._admin("trial.plant", body)["id"])

    # -- faults on purpose ----------------------------------------------

    def set_faults(self, rules: Sequence[Mapping[str, Any]]) -> None:
        """Replaces the trial's fault schedule (``trial.faults``); an empty
        list clears it. Its sends are counted again from 1. A schedule
        that is not valid is refused whole (Refused ``invalid_faults``,
        naming the rule) and the old one stays. Only a trial this process
        opened on a Stack can be given one."""
        if self._set_faults is None:
            raise MailplaneError(
                "not_administrable", f"trial {self._namespace} was attached for reading; only the stack that opened it can set its faults"
            )
        self._set_faults(rules)

    def set_webhooks(self, webhooks: Sequence[Mapping[str, Any]]) -> None:
        """Replaces the trial's provider webhooks (``trial.webhooks``); an
        empty list clears them. A list that is not valid is refused whole
        (Refused ``invalid_webhooks``) and the old one stays."""
        if self._admin is None:
            raise MailplaneError(
                "not_administrable", f"trial {self._namespace} was attached for reading; only the stack that opened it can set its webhooks"
            )
        self._admin("trial.webhooks", {"namespace": self._namespace, "webhooks": [dict(w) for w in webhooks]})

    # -- closing --------------------------------------------------------

    def close(self) -> None:
        """Closes the trial on its plane: its credentials stop working and its
        messages are deleted. A second close does nothing. A trial attached
        for reading cannot be closed (MailplaneError ``not_closable``)."""
        if self._closed:
            return
        if self._closer is None:
            raise MailplaneError(
                "not_closable", f"trial {self._namespace} was attached for reading; only the stack that opened it can close it"
            )
        self._closer()
        self._closed = True

    def __enter__(self) -> "Trial":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._closer is not None:
            self.close()

    # -- the wire -------------------------------------------------------

    @staticmethod
    def _query(recipient: Optional[str], after: Optional[int], wait: Optional[float]) -> Dict[str, str]:
        # As pkg/mailclient's Query.values: empty values are left out; wait
        # is whole milliseconds with the unit.
        q: Dict[str, str] = {}
        if recipient:
            q["recipient"] = recipient
        if after is not None and after > 0:
            q["after"] = str(int(after))
        if wait is not None and wait > 0:
            q["wait"] = f"{max(1, int(wait * 1000))}ms"
        return q

    def _get(self, rel: str, query: Mapping[str, str], wait: float, recipient: Optional[str] = None) -> Any:
        path = "/api/namespaces/" + urllib.parse.quote(self._namespace, safe="") + rel
        try:
            return gateway_get(self._api_url, path, query, self._capability, wait + _ANSWER_SLACK, self._secrets())
        except Unavailable as e:
            if self._describe_outage is not None:
                note = self._describe_outage()
                if note:
                    e.message = f"{e.message}; {note}"
            raise

    def _secrets(self) -> List[str]:
        return [self._capability] + [v for k, v in self._env.items() if "TOKEN" in k or "CAPABILITY" in k]


def _messages_of(obj: Any) -> List[Mapping[str, Any]]:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("messages"), list):
        raise Unavailable("undecodable_answer", "the gateway's list answer has no messages array")
    return list(obj["messages"])


def _events_of(obj: Any) -> List[Dict[str, Any]]:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("events"), list):
        raise Unavailable("undecodable_answer", "the gateway's events answer has no events array")
    return [dict(e) for e in obj["events"] if isinstance(e, Mapping)]


# How many links a timeout's note shows, and of how many characters each.
_NOTE_LINKS = 3
_NOTE_LINK_CHARS = 100


def _links_note(passed: List[Message]) -> str:
    """What wait_for_link's timeout says of the messages it passed over:
    how many arrived, how many had links, and the first of those links."""
    linked = [link for m in passed for link in m.links]
    if not linked:
        return f"{len(passed)} other message(s) arrived, none with a link"
    with_links = sum(1 for m in passed if m.links)
    shown = [u if len(u) <= _NOTE_LINK_CHARS else u[:_NOTE_LINK_CHARS] + "..." for u in linked[:_NOTE_LINKS]]
    more = ", ..." if len(linked) > _NOTE_LINKS else ""
    return f"{len(passed)} other message(s) arrived, {with_links} with links, none an action link: {', '.join(shown)}{more}"
