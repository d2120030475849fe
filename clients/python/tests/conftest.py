"""Shared fixtures and helpers of the mailplane Python client's tests.

They run against the real binaries: MAILPLANE_BIN names their directory
(the Makefile sets it), else the repository's bin/ (make build).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from typing import Any, Dict, Iterator, List, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)  # clients/python: importable with no install
REPO = os.path.dirname(os.path.dirname(PACKAGE_DIR))
sys.path.insert(0, PACKAGE_DIR)
os.environ.setdefault("MAILPLANE_BIN", os.path.join(REPO, "bin"))

pytest_plugins = ["mailplane.pytest_plugin", "pytester"]

from mailplane import Stack, Trial  # noqa: E402


def pytest_sessionstart(session: Any) -> None:
    binary = os.path.join(os.environ["MAILPLANE_BIN"], "mail-plane")
    if not os.access(binary, os.X_OK):
        pytest.exit(f"{binary} not found: run make build (or set MAILPLANE_BIN)", returncode=1)




@pytest.fixture
def stack(mailplane_stack: Stack) -> Stack:
    """The session's stack (from the plugin)."""
    return mailplane_stack


@pytest.fixture
def own_stack() -> Iterator[Stack]:
    """A stack of the test's own, for tests that stop or break it."""
    with Stack() as s:
        yield s


def send(
    trial: Trial, to: str, subject: str = "Hello", text: str = "Hello there.", html: Optional[str] = None, name: Optional[str] = None
) -> str:
    """Sends one message into trial through the candidate's door (POST
    /emails), as the website under test would, from the pinned sender
    with display name ``name`` if given; returns Resend's id."""
    env = trial.candidate_environment
    sender = env["WEBSITEBENCH_MAIL_FROM"] if name is None else f"{name} <{env['WEBSITEBENCH_MAIL_FROM']}>"
    body: Dict[str, Any] = {"from": sender, "to": [to], "subject": subject, "text": text}
    if html is not None:
        body["html"] = html
    req = urllib.request.Request(
        env["WEBSITEBENCH_MAIL_API_URL"],
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + env["WEBSITEBENCH_MAIL_API_TOKEN"], "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(json.load(resp)["id"])


def descendants(pid: int) -> List[int]:
    """Every process below pid, from /proc."""
    parents: Dict[int, int] = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            parents[int(e)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    out: List[int] = []
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        frontier += kids
    return out


def alive(pid: int) -> bool:
    """Whether pid runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def cmdline(pid: int) -> List[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def plane_pid(stack: Stack) -> int:
    """The pid of the stack's mail-plane serve."""
    assert stack.pid is not None
    for pid in descendants(stack.pid):
        args = cmdline(pid)
        if args and os.path.basename(args[0]) == "mail-plane" and "serve" in args:
            return pid
    raise AssertionError("no mail-plane serve under the stack")


def wait_until(cond: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


def recording_server(port: int, server: str = "HTTPServer") -> str:
    """The source of a Python program (run as `python3 -c SRC FILE`, in a
    network namespace) that serves HTTP on 127.0.0.1:port with
    http.server's server class named, answers every POST 200 and appends
    its body and a newline to FILE."""
    return (
        "import http.server, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_POST(self):\n"
        "        b = self.rfile.read(int(self.headers['Content-Length']))\n"
        "        open(sys.argv[1], 'ab').write(b + b'\\n')\n"
        "        self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers()\n"
        "    def log_message(self, *a): pass\n"
        f"http.server.{server}(('127.0.0.1', {port}), H).serve_forever()\n"
    )
