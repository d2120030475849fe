"""Stack: a running mailplane (``mail-plane up --json``), started by this
process or attached to."""

from __future__ import annotations

import atexit
import copy
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ._errors import MailplaneError, Refused, Timeout, Unavailable, redact
from ._http import rpc_call
from ._trial import Trial

__all__ = ["Stack", "find_binary"]

BundleLike = Union[Mapping[str, Any], str, "os.PathLike[str]"]


def find_binary(binary: Optional[str] = None) -> str:
    """The mail-plane binary: ``binary`` if given, else ``mail-plane`` in
    the directory ``$MAILPLANE_BIN`` (as the Makefile sets it), else
    ``mail-plane`` on ``$PATH``."""
    if binary:
        candidates = [binary]
    elif os.environ.get("MAILPLANE_BIN"):
        candidates = [os.path.join(os.environ["MAILPLANE_BIN"], "mail-plane")]
    else:
        found = shutil.which("mail-plane")
        candidates = [found] if found else []
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    where = candidates[0] if candidates else "$PATH"
    raise MailplaneError(
        "binary_not_found",
        f"mail-plane not found ({where}); pass binary=, set MAILPLANE_BIN to the directory of the "
        "mailplane binaries (make build puts them in bin/), or put them on PATH",
    )


class Stack:
    """A mailplane stack: the plane and its three surfaces.

    ``Stack()`` runs ``mail-plane up --json`` as a child process and returns
    once everything is healthy; ``with Stack() as s:`` stops it all on exit,
    also on Ctrl-C and on an exception. ``Stack.attach(...)`` uses a stack
    that someone else runs. ``s.trial`` is the trial ``up`` opened;
    ``s.open_trial()`` opens more over the plane's admin RPC.
    """

    def __init__(
        self,
        binary: Optional[str] = None,
        *,
        args: Sequence[str] = (),
        log_level: str = "warn",
        start_timeout: float = 30.0,
        env: Optional[Mapping[str, str]] = None,
    ) -> None:
        """Starts ``mail-plane up --json`` with extra ``args`` (for example
        ``["--quota-messages", "0"]``). The children's log goes to
        ``log_path``; ``env`` adds to this process's environment."""
        self._proc: Optional["subprocess.Popen[bytes]"] = None
        self._logdir: Optional[str] = None
        self._log_path: Optional[str] = None
        self._bundle: Dict[str, Any] = {}
        self._admin_grant_file: Optional[str] = None
        self._trial: Optional[Trial] = None
        self._stopped = False
        path = find_binary(binary)
        self._logdir = tempfile.mkdtemp(prefix="mailplane-py-")
        log_path = self._log_path = os.path.join(self._logdir, "stack.log")
        cmd = [path, "--log-level", log_level, "up", "--json", *args]
        full_env = dict(os.environ)
        full_env.update(env or {})
        try:
            with open(log_path, "wb") as log:
                self._proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=full_env,
                    # Its own session: a Ctrl-C in the terminal reaches this
                    # process, which then stops the stack in order.
                    start_new_session=True,
                    preexec_fn=_parent_death_signal(),
                )
        except OSError as e:
            shutil.rmtree(self._logdir, ignore_errors=True)
            raise Unavailable("start_failed", f"cannot run {path}: {e.strerror or e}") from None
        _live.add(self)
        try:
            line = self._read_bundle_line(start_timeout)
            try:
                bundle = json.loads(line)
                if not isinstance(bundle, dict):
                    raise ValueError("not an object")
            except ValueError:
                raise Unavailable("start_failed", "mail-plane up --json printed something that is not its JSON bundle") from None
            self._adopt(bundle, None)
        except BaseException:
            self._terminate()
            raise

    @classmethod
    def attach(
        cls,
        bundle: Optional[BundleLike] = None,
        *,
        plane_socket: Optional[str] = None,
        admin_grant_file: Optional[str] = None,
    ) -> "Stack":
        """A Stack for a running mailplane that this process did not start:
        from its bundle (the JSON object ``mail-plane up --json`` printed,
        as a mapping, JSON text or a file holding it), or from its plane
        socket and admin grant file. ``admin_grant_file`` overrides the
        bundle's. ``stop()`` on an attached stack does nothing."""
        self = cls.__new__(cls)
        self._proc = None
        self._logdir = None
        self._log_path = None
        self._bundle = {}
        self._admin_grant_file = None
        self._trial = None
        self._stopped = False
        b: Dict[str, Any] = {}
        if bundle is not None:
            if isinstance(bundle, Mapping):
                b = dict(bundle)
            else:
                text = str(bundle) if isinstance(bundle, str) and bundle.lstrip().startswith("{") else None
                if text is None:
                    with open(bundle, encoding="utf-8") as f:
                        text = f.read()
                try:
                    b = json.loads(text)
                except ValueError:
                    raise MailplaneError("invalid_bundle", "the bundle is not JSON") from None
                if not isinstance(b, dict):
                    raise MailplaneError("invalid_bundle", "the bundle is not a JSON object")
        if plane_socket:
            b["plane_socket"] = plane_socket
        if not b.get("plane_socket") and not b.get("api_url"):
            raise MailplaneError("invalid_bundle", "attach needs a bundle, or plane_socket and admin_grant_file")
        self._adopt(b, admin_grant_file)
        return self

    def _adopt(self, bundle: Dict[str, Any], admin_grant_file: Optional[str]) -> None:
        self._bundle = bundle
        self._admin_grant_file = admin_grant_file or bundle.get("admin_grant_file") or None
        if bundle.get("api_url") and bundle.get("namespace") and bundle.get("read_capability"):
            self._trial = Trial._from_bundle(
                bundle, closer=self._closer(str(bundle["namespace"])), describe_outage=self._describe_outage, admin=self._rpc
            )

    # -- what it is -----------------------------------------------------

    @property
    def trial(self) -> Trial:
        """The trial ``mail-plane up`` opened."""
        if self._trial is None:
            raise MailplaneError("no_trial", "this stack was attached by its plane socket alone: it has no trial of its own")
        return self._trial

    @property
    def bundle(self) -> Dict[str, Any]:
        """A copy of the JSON bundle ``up --json`` printed. It holds secrets."""
        return copy.deepcopy(self._bundle)

    @property
    def plane_socket(self) -> Optional[str]:
        return self._bundle.get("plane_socket")

    @property
    def data_dir(self) -> Optional[str]:
        return self._bundle.get("data_dir")

    @property
    def api_url(self) -> Optional[str]:
        return self._bundle.get("api_url")

    @property
    def admin_grant_file(self) -> Optional[str]:
        return self._admin_grant_file

    @property
    def console_url(self) -> Optional[str]:
        """The operator's console (pages and /metrics need the admin grant)."""
        return self._bundle.get("console_url")

    @property
    def pid(self) -> Optional[int]:
        """The pid of ``mail-plane up``, None for an attached stack."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Optional[str]:
        """The file the stack's processes log to (removed by stop)."""
        return self._log_path

    @property
    def running(self) -> bool:
        """Whether the ``mail-plane up`` this process started still runs."""
        return self._proc is not None and self._proc.poll() is None and not self._stopped

    def __repr__(self) -> str:
        if self._proc is None:
            return f"<mailplane.Stack attached plane_socket={self.plane_socket} api_url={self.api_url}>"
        state = "running" if self.running else f"stopped (status {self._proc.returncode})"
        return f"<mailplane.Stack pid={self._proc.pid} {state} api_url={self.api_url} data_dir={self.data_dir}>"

    # -- trials over the admin RPC ------------------------------------

    def open_trial(
        self,
        ttl: Optional[float] = None,
        netns: Optional[str] = None,
        faults: Optional[Sequence[Mapping[str, Any]]] = None,
        webhooks: Optional[Sequence[Mapping[str, Any]]] = None,
        agent_netns: Optional[str] = None,
    ) -> Trial:
        """Opens a fresh candidate trial on this stack's plane over its admin
        RPC (``trial.open`` on the Unix socket; no process is started).
        ``ttl`` is in seconds. ``trial.close()`` (or ``with``) closes it.
        ``netns``, a network namespace file (``/proc/PID/ns/net``,
        ``/run/netns/NAME``), has the stack bind the candidate's doors on
        that namespace's loopback: ``candidate_environment`` then names
        addresses valid only inside it, and plain SMTP there is the
        trial's. ``agent_netns``, a network namespace file too, has it bind
        the agent's doors on that namespace's loopback: IMAP, where plain
        LOGIN is taken without TLS, and the inbox's pages and MCP;
        ``trial.inbox_imap`` (``plain_login`` true, no ``tls_port``),
        ``inbox_url`` and ``inbox_mcp_url`` then name them. ``faults`` is the trial's fault schedule: a list of rules
        (``{"door": "http", "first": 2, "do": "refuse", "status": 429,
        "retry_after": 2}``...); one that is not valid is refused whole
        (Refused ``invalid_faults``, naming the rule). ``trial.set_faults``
        replaces it. ``webhooks`` are the trial's provider webhooks, each
        ``{"provider": "resend"|"sendgrid"|"mailgun"|"postmark", "url":
        "http://...", "retry_seconds": [1, 5]}`` (``retry_seconds``
        optional); a list that is not valid is refused whole (Refused
        ``invalid_webhooks``). ``trial.set_webhooks`` replaces them."""
        body: Dict[str, Any] = {"profile": "candidate"}
        if ttl is not None:
            if ttl <= 0:
                raise MailplaneError("invalid_ttl", "ttl must be a positive number of seconds")
            body["ttl_ms"] = max(1, int(ttl * 1000))
        if netns is not None:
            body["netns"] = netns
        if agent_netns is not None:
            body["agent_netns"] = agent_netns
        if faults is not None:
            body["faults"] = list(faults)
        if webhooks is not None:
            body["webhooks"] = [dict(w) for w in webhooks]
        bundle = self._rpc("trial.open", body)
        if "api_url" not in bundle and self.api_url:
            bundle["api_url"] = self.api_url
        ns = str(bundle.get("namespace", ""))
        return Trial._from_bundle(
            bundle, closer=self._closer(ns), set_faults=self._fault_setter(ns), describe_outage=self._describe_outage, admin=self._rpc
        )

    def trial_info(self, namespace: str) -> Dict[str, Any]:
        """Describes the open trial ``namespace`` names, without its secrets
        (``trial.info``): namespace, profile, state, smtp_port, age_ms,
        ttl_ms, plane, messages, faults (its schedule, if any) and
        faults_injected. A trial's smtp_port changes only when
        ``mail-plane up --data`` starts again and finds another process
        holding it (its trail then records ``port_moved``)."""
        return self._rpc("trial.info", {"namespace": namespace})

    def _fault_setter(self, namespace: str) -> Callable[[Sequence[Mapping[str, Any]]], None]:
        def set_faults(rules: Sequence[Mapping[str, Any]]) -> None:
            self._rpc("trial.faults", {"namespace": namespace, "faults": list(rules)})

        return set_faults

    def _closer(self, namespace: str) -> Callable[[], None]:
        def close() -> None:
            if self._stopped:
                return  # the stack, and every trial on it, is gone
            try:
                self._rpc("trial.close", {"namespace": namespace})
            except Refused as e:
                if e.code != "not_found":  # already gone (its TTL ran out): closed
                    raise

        return close

    def _rpc(self, method: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        socket_path = self.plane_socket
        if not socket_path:
            raise MailplaneError("no_plane_socket", "this stack's bundle names no plane_socket")
        grant = self._admin_grant()
        _, answer = rpc_call(socket_path, grant, method, body, secrets=self._secrets())
        return answer

    def _admin_grant(self) -> str:
        path = self._admin_grant_file
        if not path:
            raise MailplaneError(
                "no_admin_grant",
                "this stack's bundle has no admin_grant_file (mail-plane up --json prints it once trials can be "
                "opened on a running stack); attach with admin_grant_file= to name one",
            )
        try:
            with open(path, encoding="utf-8") as f:
                grant = f.read().strip()
        except OSError as e:
            raise MailplaneError("no_admin_grant", f"cannot read the admin grant file {path}: {e.strerror}") from None
        if not grant:
            raise MailplaneError("no_admin_grant", f"the admin grant file {path} is empty")
        return grant

    def _secrets(self) -> List[str]:
        out = [str(self._bundle.get("read_capability") or "")]
        env = self._bundle.get("candidate_environment") or {}
        out += [str(v) for k, v in env.items() if "TOKEN" in k or "CAPABILITY" in k]
        return [s for s in out if s]

    def _describe_outage(self) -> str:
        if self._proc is None:
            return ""
        if self._stopped:
            return "the stack has been stopped"
        rc = self._proc.poll()
        if rc is not None:
            return f"mail-plane up (pid {self._proc.pid}) has exited with status {rc}" + self._log_tail(" (its log ends: ", ")", lines=1)
        return ""

    # -- starting and stopping ------------------------------------------

    def _read_bundle_line(self, timeout: float) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Timeout("start_timeout", f"mail-plane up was not healthy within {timeout:g}s" + self._log_tail("; its log ends: "))
                if not sel.select(remaining):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    rc = self._proc.wait()
                    raise Unavailable(
                        "start_failed", f"mail-plane up exited with status {rc} before it was healthy" + self._log_tail("; its log ends: ")
                    )
                buf += chunk
        return buf.split(b"\n", 1)[0].decode("utf-8", "replace")

    def _log_tail(self, prefix: str, suffix: str = "", lines: int = 8) -> str:
        if not self._log_path:
            return ""
        try:
            with open(self._log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 8192))
                tail = f.read().decode("utf-8", "replace").strip().splitlines()[-lines:]
        except OSError:
            return ""
        if not tail:
            return ""
        return prefix + redact(" | ".join(tail), self._secrets()) + suffix

    def stop(self, timeout: float = 15.0) -> None:
        """Stops the stack this process started (SIGTERM to ``mail-plane
        up``, which stops its children; SIGKILL for anything still running
        after ``timeout``), and removes its log. Does nothing for an
        attached stack or a second time."""
        if self._proc is None or self._stopped:
            return
        self._stopped = True
        _live.discard(self)
        proc = self._proc
        try:
            if proc.poll() is None:
                children = _children(proc.pid)
                try:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    _kill(proc, children)
                except BaseException:  # a second Ctrl-C while stopping: finish the job quickly
                    _kill(proc, children)
                    raise
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
            if self._logdir:
                shutil.rmtree(self._logdir, ignore_errors=True)

    def _terminate(self) -> None:
        """Stop, for a stack that failed to start; keeps the first error."""
        try:
            self.stop(timeout=5.0)
        except Exception:
            pass

    close = stop

    def __enter__(self) -> "Stack":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        # A stack nobody stopped must not outlive its last reference.
        try:
            if getattr(self, "_proc", None) is not None and not self._stopped:
                self.stop(timeout=5.0)
        except Exception:
            pass


# Stacks this process started and has not stopped: stopped at exit.
_live: "weakref.WeakSet[Stack]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for s in list(_live):
        s._terminate()


def _children(pid: int) -> List[int]:
    """The pids whose parent is pid (from /proc; empty where there is none)."""
    out: List[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(e))
    return out


def _kill(proc: "subprocess.Popen[bytes]", children: List[int]) -> None:
    """SIGKILL for mail-plane up and the children it had; reaps up."""
    for pid in [proc.pid] + children:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass


def _parent_death_signal() -> Optional[Callable[[], None]]:
    """On Linux, a preexec_fn that makes the kernel send SIGTERM to
    ``mail-plane up`` when this process dies without stopping it (killed
    with SIGKILL, say); up then stops its children. Only from the main
    thread: the signal follows the thread that started the child."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec
