"""pytest plugin: a mailplane stack per session and a fresh trial per test.

Installed (``pip install ./clients/python``), pytest loads it by itself.
From a checkout, with ``clients/python`` on ``sys.path``, either run
``pytest -p mailplane.pytest_plugin`` or put this line in your top-level
``conftest.py``::

    pytest_plugins = ["mailplane.pytest_plugin"]

Fixtures:

``mailplane_stack`` (session)
    a :class:`mailplane.Stack` running ``mail-plane up --json``, stopped
    at the end of the session. The binary is ``--mailplane-bin`` (a
    ``mail-plane`` file or a directory holding it), else ``$MAILPLANE_BIN``,
    else ``$PATH``. Override the fixture to attach to a stack of your own.
``mailplane_trial`` (function)
    a fresh trial for the test, closed afterwards.

When a test that used ``mailplane_trial`` fails, its report gets a section
"mailplane messages" with every message of the trial.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Generator, Iterator, List, Optional, Tuple, TypeVar, cast

import pytest

from ._errors import MailplaneError
from ._message import Message
from ._stack import Stack
from ._trial import Trial

def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("mailplane")
    group.addoption(
        "--mailplane-bin",
        default=None,
        help="the mail-plane binary, or the directory holding the mailplane binaries (default: $MAILPLANE_BIN, then $PATH)",
    )


def _binary(config: Any) -> Optional[str]:
    opt = config.getoption("--mailplane-bin", default=None)
    if opt and os.path.isdir(opt):
        return os.path.join(opt, "mail-plane")
    return opt or None


@pytest.fixture(scope="session")
def mailplane_stack(request: Any) -> Iterator[Stack]:
    """A mailplane stack for the whole session (mail-plane up --json)."""
    with Stack(_binary(request.config)) as stack:
        yield stack


@pytest.fixture
def mailplane_trial(request: Any, mailplane_stack: Stack) -> Iterator[Trial]:
    """A fresh trial for one test (opened over the admin RPC on the
    session's stack: no process per test), closed after it."""
    trial = mailplane_stack.open_trial()
    request.node._mailplane_trial = trial
    try:
        yield trial
    finally:
        trial.close()


_F = TypeVar("_F", bound=Callable[..., Any])
_hookwrapper = cast(Callable[[_F], _F], pytest.hookimpl(hookwrapper=True))


@_hookwrapper
def pytest_runtest_makereport(item: Any, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    trial = getattr(item, "_mailplane_trial", None)
    if trial is None:
        return
    report.sections.append((f"mailplane messages ({trial.namespace})", describe_messages(trial)))


def describe_messages(trial: Trial, max_text: int = 2000) -> str:
    """The trial's messages as text for a failure report (no secret: a
    message never holds the trial's capability or tokens)."""
    try:
        msgs: List[Message] = trial.messages()
    except MailplaneError as e:
        return f"could not read the trial's messages: {e}"
    if not msgs:
        return "no messages"
    out = []
    for m in msgs:
        text = m.text if len(m.text) <= max_text else m.text[:max_text] + f"... ({len(m.text)} characters)"
        out.append(
            f"#{m.id} from {m.envelope_from} to {', '.join(m.recipients)}\n"
            f"  subject: {m.subject}\n"
            f"  otp: {m.otp}  codes: {m.codes}  action_link: {m.action_link}  links: {m.links}\n"
            + "".join(f"  | {line}\n" for line in text.splitlines())
        )
    return "\n".join(out)
