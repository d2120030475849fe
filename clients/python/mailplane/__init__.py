"""mailplane: a Python client for a local mail plane (standard library only).

    from mailplane import Stack

    with Stack() as stack:                   # mail-plane up --json; stopped on exit
        trial = stack.trial
        run_candidate(env=trial.candidate_environment)
        code = trial.wait_for_code(recipient="ada@example.com", timeout=60)

Errors are typed: Refused (policy: a wrong capability, an unknown message),
Unavailable (an outage), Bug (a server's bug, or an answer that does not
decode), Timeout (a wait ran out), all MailplaneError with a
stable ``.code``.
"""

from ._errors import Bug, MailplaneError, Refused, Timeout, Unavailable
from ._message import Attachment, Checksums, Message
from ._stack import Stack, find_binary
from ._trial import Trial

__version__ = "0.1.0"

__all__ = [
    "Bug",
    "Attachment",
    "Checksums",
    "MailplaneError",
    "Message",
    "Refused",
    "Stack",
    "Timeout",
    "Trial",
    "Unavailable",
    "find_binary",
]
