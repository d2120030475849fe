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
import sys
sys.path.insert(0, {pkg!r})
from mailplane import Stack
with Stack() as s:
    print(s.pid, s.data_dir, s.log_path, flush=True)
    s.trial.wait_for_message(recipient="never@example.com", timeout=120)
"""


def start_harness() -> Tuple["subprocess.Popen[str]", List[int], str, str]:
    p = subprocess.Popen(
        [sys.executable, "-c", HARNESS.format(pkg=PACKAGE_DIR)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    line = p.stdout.readline().split()
    assert len(line) == 3, p.communicate(timeout=10)
    up_pid, data_dir, log_dir = int(line[0]), line[1], os.path.dirname(line[2])
    procs = descendants(p.pid)
    assert up_pid in procs and len(procs) == 5, procs  # up, the plane and the three surfaces
    time.sleep(0.5)  # the wait is being held by the gateway
    return p, procs, data_dir, log_dir


def test_ctrl_c_during_a_wait_stops_the_stack() -> None:
    p, procs, data_dir, log_dir = start_harness()
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
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
