"""Ctrl-C (SIGINT) during a wait, and a harness killed outright: the stack
is stopped and no child process is left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from typing import List, Tuple

from conftest import PACKAGE_DIR, alive, descendants, wait_until

HARNESS = """
import signal, sys, threading
sys.path.insert(0, {pkg!r})
from mailplane import Stack
# Ctrl-C as in a terminal, however pytest was started: a shell runs a
# background job (make test &) with SIGINT ignored, and Python then never
# installs its handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
if {other_thread!r}:
    # A harness with a thread of its own (a timer, a log reader): the
    # kernel hands Ctrl-C to that thread while the main thread waits.
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGINT}})
with Stack() as s:
    print(s.pid, s.data_dir, s.log_path, flush=True)
    s.trial.wait_for_message(recipient="never@example.com", timeout=120)
"""


def start_harness(other_thread: bool = False) -> Tuple["subprocess.Popen[str]", List[int], str, str]:
    p = subprocess.Popen(
        [sys.executable, "-c", HARNESS.format(pkg=PACKAGE_DIR, other_thread=other_thread)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    line = p.stdout.readline().split()
    assert len(line) == 3, p.communicate(timeout=10)
    up_pid, data_dir, log_dir = int(line[0]), line[1], os.path.dirname(line[2])
    procs = descendants(p.pid)
    assert up_pid in procs and len(procs) == 7, procs  # up, the plane, the three surfaces, the console and the hooks process
    time.sleep(0.5)  # the wait is being held by the gateway
    return p, procs, data_dir, log_dir


def test_ctrl_c_during_a_wait_stops_the_stack() -> None:
    ctrl_c_stops_the_stack(other_thread=False)


def test_ctrl_c_that_another_thread_receives_stops_a_wait() -> None:
    """Python raises KeyboardInterrupt in the main thread between
    instructions: a signal that reaches another thread (or lands just
    before the main thread blocks) is only seen when the blocking call
    returns. The client waits in short slices, so the gateway's held wait
    (up to 60 s) does not hold a Ctrl-C."""
    ctrl_c_stops_the_stack(other_thread=True)


def ctrl_c_stops_the_stack(other_thread: bool) -> None:
    p, procs, data_dir, log_dir = start_harness(other_thread)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()  # and up with it (its parent-death signal)
        raise
    took = time.monotonic() - t0
    assert "KeyboardInterrupt" in err, err
    assert p.returncode != 0
    assert took < 10, took
    left = [pid for pid in procs if alive(pid)]
    assert not left, f"child processes left after Ctrl-C: {left}"
    assert not os.path.exists(data_dir), "the stack's temporary data directory is still there"
    assert not os.path.exists(log_dir), "the stack's log directory is still there"


def test_a_harness_killed_outright_takes_its_stack_along() -> None:
    p, procs, data_dir, log_dir = start_harness()
    p.kill()  # SIGKILL: no Python cleanup runs; the kernel tells mail-plane up
    p.communicate(timeout=10)
    assert wait_until(lambda: not [pid for pid in procs if alive(pid)], timeout=15), [pid for pid in procs if alive(pid)]
    assert wait_until(lambda: not os.path.exists(data_dir), timeout=5)
    shutil.rmtree(log_dir)  # the one thing a killed harness cannot remove: its stack's log
