"""The evaluator's message, as mail-gateway writes it.

These dataclasses mirror ``pkg/mailclient``'s ``Message``, ``Attachment``
and ``Checksums`` field by field (tests/test_wire.py checks them against
the Go types). A field's wire name is its own name unless its metadata
says ``wire``.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

__all__ = ["Message", "Attachment", "Checksums"]


_FRACTION = re.compile(r"\.(\d+)")


def _wire(name: str) -> Dict[str, Any]:
    return {"wire": name}


@dataclass(frozen=True)
class Checksums:
    """Checksums of an attachment's decoded content, lowercase hex."""

    md5: str = field(default="", metadata=_wire("MD5"))
    sha1: str = field(default="", metadata=_wire("SHA1"))
    sha256: str = field(default="", metadata=_wire("SHA256"))


@dataclass(frozen=True)
class Attachment:
    """One attachment or inline part, with Mailpit's field names on the wire."""

    checksums: Checksums = field(default_factory=Checksums, metadata=_wire("Checksums"))
    content_id: str = field(default="", metadata=_wire("ContentID"))
    content_type: str = field(default="", metadata=_wire("ContentType"))
    file_name: str = field(default="", metadata=_wire("FileName"))
    part_id: str = field(default="", metadata=_wire("PartID"))
    size: int = field(default=0, metadata=_wire("Size"))


@dataclass(frozen=True)
class Message:
    """One message of a trial, as the evaluator sees it.

    ``id`` is stable in its namespace (1, 2, 3... in arrival order);
    ``otp`` is the best one-time code (``codes[0]``) or None; ``links`` are
    the http(s) URLs of the text and HTML; ``action_link`` is the one link a
    person is asked to click (verify, confirm, sign in...) or None.
    ``label`` is the evaluator's label of mail it planted, ``""`` for the
    candidate's. ``fault`` is ``"delay"`` or ``"duplicate"`` for a message a
    fault of the trial's schedule delivered late or stored twice, ``""``
    otherwise. ``from_name`` is the display name the sender wrote in From
    (``"Acme"`` of ``"Acme <no-reply@…>"``), ``""`` when none;
    ``envelope_from`` is the address. ``html`` is the HTML part as sent,
    ``""`` when there is none. ``received_at`` is when the plane stored the
    message, RFC 3339 in UTC as the gateway wrote it; ``received`` is the
    same as a ``datetime``. ``raw`` is the decoded JSON object as the
    gateway sent it.
    """

    attachments: List[Attachment] = field(default_factory=list)
    codes: List[str] = field(default_factory=list)
    envelope_from: str = ""
    fault: str = ""
    from_name: str = ""
    html: str = ""
    id: int = 0
    #: Set on mail the evaluator planted (``Trial.plant``), and only there.
    label: str = field(default="", metadata={"omitempty": True})
    links: List[str] = field(default_factory=list)
    namespace: str = ""
    otp: Optional[str] = None
    received_at: str = ""
    recipients: List[str] = field(default_factory=list)
    subject: str = ""
    text: str = ""
    action_link: Optional[str] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False, hash=False, metadata={"wire": None})

    @property
    def received(self) -> Optional[datetime.datetime]:
        """``received_at`` as an aware ``datetime`` (UTC), or None when the
        gateway sent none. Python before 3.11 reads neither a ``Z`` nor more
        than six decimals, so both are normalized first."""
        if not self.received_at:
            return None
        stamp = self.received_at.replace("Z", "+00:00")
        m = _FRACTION.search(stamp)
        if m:
            stamp = stamp[: m.start()] + "." + (m.group(1) + "000000")[:6] + stamp[m.end() :]
        return datetime.datetime.fromisoformat(stamp)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Message":
        """Builds a Message from the gateway's JSON object. Unknown keys are
        kept in ``raw`` only; missing ones take their zero value, as Go's
        decoder leaves them."""
        return _decode(cls, obj, raw=True)  # type: ignore[no-any-return]

    def to_json(self) -> Dict[str, Any]:
        """The message as the gateway's JSON object (without ``raw``)."""
        return _encode(self)


def _decode(cls: Any, obj: Mapping[str, Any], raw: bool = False) -> Any:
    if not isinstance(obj, Mapping):
        raise TypeError(f"expected a JSON object for {cls.__name__}, got {type(obj).__name__}")
    kwargs: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        wire = f.metadata.get("wire", f.name)
        if wire is None or wire not in obj or obj[wire] is None:
            continue
        value = obj[wire]
        if f.name == "attachments":
            value = [_decode(Attachment, a) for a in value]
        elif f.name == "checksums":
            value = _decode(Checksums, value)
        elif isinstance(value, list):
            value = list(value)
        kwargs[f.name] = value
    if raw:
        kwargs["raw"] = dict(obj)
    return cls(**kwargs)


def _encode(obj: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        wire = f.metadata.get("wire", f.name)
        if wire is None:
            continue
        value = getattr(obj, f.name)
        if (f.metadata.get("omitempty") or f.name == "fault") and not value:
            continue  # omitted when empty, as the gateway does (Go's omitempty)
        if dataclasses.is_dataclass(value):
            value = _encode(value)
        elif isinstance(value, list):
            value = [_encode(v) if dataclasses.is_dataclass(v) else v for v in value]
        out[wire] = value
    return out
