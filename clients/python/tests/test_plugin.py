"""The pytest plugin, run as a user runs it: a separate pytest with
-p mailplane.pytest_plugin, from the checkout (no install)."""

from __future__ import annotations

import os

import pytest

from conftest import PACKAGE_DIR, alive

INNER = '''
import json, os, urllib.request

def send(trial, to, subject, text):
    env = trial.candidate_environment
    body = {"from": env["WEBSITEBENCH_MAIL_FROM"], "to": [to], "subject": subject, "text": text}
    req = urllib.request.Request(env["WEBSITEBENCH_MAIL_API_URL"], data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + env["WEBSITEBENCH_MAIL_API_TOKEN"], "Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).close()

def note(*words):
    with open(os.environ["INNER_NOTES"], "a") as f:
        f.write(" ".join(str(w) for w in words) + "\\n")

def test_passes_with_a_fresh_trial(mailplane_stack, mailplane_trial):
    note("stack", mailplane_stack.pid)
    note("trial", mailplane_trial.namespace, mailplane_trial.read_capability)
    assert mailplane_trial.messages() == []
    send(mailplane_trial, "first@example.com", "Only in the first trial", "Hi.")
    assert mailplane_trial.wait_for_message(recipient="first@example.com", timeout=10).subject == "Only in the first trial"

def test_fails_and_its_messages_are_printed(mailplane_trial):
    note("trial", mailplane_trial.namespace, mailplane_trial.read_capability)
    assert mailplane_trial.messages() == []
    send(mailplane_trial, "report@example.com", "Report me please", "Your code is 777333.")
    mailplane_trial.wait_for_message(timeout=10)
    assert False, "deliberately"
'''


def test_plugin_fixtures_and_failure_report(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = os.environ["MAILPLANE_BIN"]
    notes = pytester.path / "notes.txt"
    monkeypatch.setenv("PYTHONPATH", PACKAGE_DIR)
    monkeypatch.setenv("INNER_NOTES", str(notes))
    monkeypatch.delenv("MAILPLANE_BIN")  # the binary comes from --mailplane-bin
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "mailplane.pytest_plugin", "--mailplane-bin", bindir, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    lines = notes.read_text().split("\n")
    trials = [ln.split() for ln in lines if ln.startswith("trial ")]
    stack_pid = int(next(ln.split()[1] for ln in lines if ln.startswith("stack ")))
    assert len(trials) == 2 and trials[0][1] != trials[1][1], "each test gets a fresh trial"
    # The failing test's report lists its trial's messages, and only those.
    assert f"mailplane messages ({trials[1][1]})" in out
    assert "Report me please" in out and "otp: 777333" in out and "to report@example.com" in out
    assert "Only in the first trial" not in out
    for _, _, capability in trials:
        assert capability not in out
    assert not alive(stack_pid), "the session's stack outlived the session"
