"""The reference's density figures: the baseline of make bench's density section.

The Go harness (bench/density.go) writes this file into its run directory and
runs it with the python3 on PATH:

    python3 reference_density.py --reference PATH/local_mailbox.py \
        --mailpit-socket RUN/m…/http.sock --mailpit-pid PID --trials 1000

It loads the reference (standard library only, as this script), makes one
``MailPlane`` on the run's Mailpit, opens and closes one trial (imports and
first-use allocations), then opens ``--trials`` trials one after the other,
timing each ``MailPlane.trial()``, and reads the resident size of this process
(and of Mailpit) before and after, from /proc/PID/smaps_rollup. It prints one
JSON object on stdout and exits without closing the trials: the reference's
close waits for each of a trial's three servers' poll interval (0.5 s), so
closing 1,000 would take minutes; the kernel closes their sockets at exit.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import sys
import threading
import time


def memory(pid: str = "self") -> dict[str, int]:
    """Rss, Pss and Pss_Anon of a process, in KiB, from /proc/PID/smaps_rollup."""
    keys = {"Rss": "rss_kib", "Pss": "pss_kib", "Pss_Anon": "pss_anon_kib"}
    out = dict.fromkeys(keys.values(), 0)
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in keys:
                out[keys[key]] = int(rest.split()[0])
    return out


def threads(pid: str = "self") -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def snapshot(mailpit_pid: str) -> dict[str, object]:
    gc.collect()
    return {
        **memory(),
        "threads": threads(),
        "mailpit": memory(mailpit_pid) if mailpit_pid else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", required=True, help="path of local_mailbox.py")
    ap.add_argument("--mailpit-socket", required=True, help="Mailpit's HTTP Unix socket")
    ap.add_argument("--mailpit-pid", default="", help="Mailpit's pid, for its size")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--settle", type=float, default=1.0, help="seconds before each size is read")
    args = ap.parse_args()

    spec = importlib.util.spec_from_file_location("local_mailbox", args.reference)
    if spec is None or spec.loader is None:
        print(f"cannot load {args.reference}", file=sys.stderr)
        return 2
    lm = importlib.util.module_from_spec(spec)
    sys.modules["local_mailbox"] = lm  # dataclasses look their module up
    spec.loader.exec_module(lm)

    plane = lm.MailPlane(lm.MailpitClient(args.mailpit_socket))
    if not plane.healthy():
        print("Mailpit is not ready on " + args.mailpit_socket, file=sys.stderr)
        return 1
    t0 = time.perf_counter_ns()
    warm = plane.trial()
    warm_ns = time.perf_counter_ns() - t0
    warm.close()

    time.sleep(args.settle)
    before = snapshot(args.mailpit_pid)
    trials = []
    open_ns = []
    start = time.perf_counter_ns()
    for _ in range(args.trials):
        t0 = time.perf_counter_ns()
        trials.append(plane.trial())
        open_ns.append(time.perf_counter_ns() - t0)
    elapsed_ns = time.perf_counter_ns() - start
    # Every trial is usable: a candidate environment with its own SMTP port.
    ports = {t.candidate_environment["WEBSITEBENCH_SMTP_PORT"] for t in trials}
    if len(ports) != len(trials):
        print(f"{len(trials)} trials share {len(ports)} SMTP ports", file=sys.stderr)
        return 1
    time.sleep(args.settle)
    after = snapshot(args.mailpit_pid)

    json.dump(
        {
            "python": platform.python_implementation() + " " + platform.python_version(),
            "trials": len(trials),
            "live_threads": threading.active_count(),
            "warmup_open_ns": warm_ns,
            "open_ns": open_ns,
            "open_elapsed_ns": elapsed_ns,
            "before": before,
            "after": after,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
