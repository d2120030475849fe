"""The exceptions of mailplane: one base class and four kinds of failure.

Every exception carries ``.code``, a stable machine-readable code (the
gateway's ``error`` code such as ``forbidden`` or ``mailpit_unavailable``,
the plane's RPC code such as ``unknown_method``, or one of this client's
own: ``timeout``, ``unreachable``, ``start_failed``, ...), and ``.status``,
the HTTP status when there was an answer. Messages never hold a secret.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

__all__ = ["MailplaneError", "Refused", "Unavailable", "Bug", "Timeout", "redact"]


class MailplaneError(Exception):
    """Base class of every mailplane error.

    ``code`` is stable and meant for programs; the message is for people.
    """

    def __init__(self, code: str, message: str, *, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message

    def __str__(self) -> str:
        if self.status is not None:
            return f"{self.message} [{self.code}, HTTP {self.status}]"
        return f"{self.message} [{self.code}]"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, message={self.message!r})"


class Refused(MailplaneError):
    """A refusal by policy: a wrong capability (``forbidden``), an unknown
    message (``message_not_found``), a bad argument (``invalid_wait``), an
    unknown RPC method (``unknown_method``), ... Retrying will not help."""


class Unavailable(MailplaneError):
    """An outage: the plane or its store is down (``mailpit_unavailable``,
    ``store_unavailable``), or nothing answers (``unreachable``). Retrying
    later may help."""


class Bug(MailplaneError):
    """A bug, neither a refusal nor an outage: the gateway or the plane
    failed (500 ``internal_error``), or answered what this client cannot
    decode (``undecodable_answer``, ``internal_error``). Retrying will not
    help; the server's log says why."""


class Timeout(MailplaneError):
    """A wait ran out (``timeout``) or the stack did not start in time
    (``start_timeout``)."""


# Secret formats the plane mints (docs/operator.md: "trial create"): 64 hex
# characters (capabilities, tokens), grants, and 43-character base64url
# inbox tokens. Known secret values are replaced first.
_SECRET_PATTERNS = re.compile(r"mpg_[0-9a-fA-F]{16,}|\b[0-9a-fA-F]{64}\b|(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Returns text with every known secret, and anything shaped like a
    minted secret, replaced by ``[redacted]``."""
    for s in secrets:
        if s:
            text = text.replace(s, "[redacted]")
    return _SECRET_PATTERNS.sub("[redacted]", text)
