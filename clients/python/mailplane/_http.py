"""The two transports: HTTP to mail-gateway, and the plane's admin RPC
(HTTP/1.1 + JSON over its Unix socket). One connection per call, standard
library only. Every failure becomes a typed error without any secret in it.
"""

from __future__ import annotations

import http.client
import json
import selectors
import socket
import time
import urllib.parse
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from ._errors import Bug, MailplaneError, Refused, Unavailable, redact

USER_AGENT = "mailplane-python"
MAX_RESPONSE_BYTES = 64 << 20  # as pkg/mailclient and pkg/rpc

# Plane RPC codes that mean "try again later" rather than "no", and the
# code of a bug (pkg/rpc: a plane answer without its class has its code's).
RPC_OUTAGE_CODES = frozenset({"store_unavailable", "plane_unavailable", "deadline_exceeded"})
RPC_BUG_CODE = "internal_error"
RPC_CLASSES = {"refused": Refused, "outage": Unavailable, "bug": Bug}


def _read_body(resp: http.client.HTTPResponse) -> bytes:
    body = resp.read(MAX_RESPONSE_BYTES + 1)
    if len(body) > MAX_RESPONSE_BYTES:
        raise Unavailable("answer_too_large", f"the answer exceeds {MAX_RESPONSE_BYTES} bytes")
    return body


def gateway_get(
    api_url: str,
    path: str,
    query: Mapping[str, str],
    capability: str,
    timeout: float,
    secrets: Iterable[str] = (),
) -> Any:
    """GET api_url + path?query with the capability as Bearer; returns the
    decoded JSON of a 200 answer, raises Refused (4xx), Bug (500, an answer
    that does not decode), Unavailable (any other 5xx, no connection, no
    answer in time)."""
    u = urllib.parse.urlsplit(api_url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise MailplaneError("invalid_api_url", f"api_url must be an http(s) URL, not {redact(api_url, secrets)!r}")
    target = u.path.rstrip("/") + path
    if query:
        # Go's url.Values.Encode: keys sorted, QueryEscape (space as +).
        target += "?" + urllib.parse.urlencode(sorted(query.items()))
    conn_cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(u.hostname, u.port, timeout=timeout)
    where = f"mail-gateway at {u.scheme}://{u.netloc}"
    try:
        try:
            conn.request(
                "GET",
                target,
                headers={"Authorization": "Bearer " + capability, "Accept": "application/json", "User-Agent": USER_AGENT},
            )
            _await_answer(conn.sock, timeout)
            resp = conn.getresponse()
            body = _read_body(resp)
        except socket.timeout:
            raise Unavailable("no_answer", f"{where} did not answer within {timeout:.0f}s") from None
        except (OSError, http.client.HTTPException) as e:
            raise Unavailable("unreachable", f"{where} is unreachable: {redact(_describe(e), secrets)}") from None
    finally:
        conn.close()
    if resp.status == 200:
        try:
            return json.loads(body)
        except ValueError:
            raise Bug("undecodable_answer", f"{where} sent an answer that is not JSON") from None
    code, message = "unexpected_answer", resp.reason or "unexpected answer"
    try:
        obj = json.loads(body)
        if isinstance(obj, dict) and isinstance(obj.get("error"), str) and obj["error"]:
            code, message = obj["error"], str(obj.get("message") or message)
    except ValueError:
        pass
    text = f"{where}: {redact(message, secrets)}"
    if resp.status == 500:
        raise Bug(code, text, status=resp.status)
    if resp.status > 500:
        raise Unavailable(code, text, status=resp.status)
    raise Refused(code, text, status=resp.status)


# How long a wait for an answer blocks at a time. Python raises
# KeyboardInterrupt between its instructions, in the main thread: a Ctrl-C
# that another thread receives, or that lands just before the main thread
# enters a blocking call, is only seen when that call returns, and a
# gateway holds a wait for up to 60 s. Waiting in slices bounds that.
_WAIT_SLICE = 0.2


def _await_answer(sock: Optional[socket.socket], timeout: float) -> None:
    """Returns once sock has an answer to read; socket.timeout after
    timeout seconds. Blocks at most _WAIT_SLICE at a time, so that a
    pending Ctrl-C is raised within a slice."""
    if sock is None:
        return
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        while not sel.select(min(_WAIT_SLICE, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                raise socket.timeout("timed out")


class _UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP/1.1 connection over a Unix stream socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("plane", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def rpc_call(
    socket_path: str,
    grant: str,
    method: str,
    body: Mapping[str, Any],
    timeout: float = 30.0,
    secrets: Iterable[str] = (),
) -> Tuple[int, Dict[str, Any]]:
    """POST /v1/{method} to the plane; returns (200, answer) or raises
    Refused / Unavailable / Bug with the plane's code and class (pkg/rpc);
    an answer that does not decode is a Bug, as pkg/rpc's client says."""
    secrets = list(secrets) + [grant]
    where = f"the plane at {socket_path}"
    conn = _UnixHTTPConnection(socket_path, timeout)
    try:
        try:
            conn.request(
                "POST",
                "/v1/" + method,
                body=json.dumps(body).encode(),
                headers={"Authorization": "Bearer " + grant, "Content-Type": "application/json", "User-Agent": USER_AGENT},
            )
            resp = conn.getresponse()
            data = _read_body(resp)
        except socket.timeout:
            raise Unavailable("deadline_exceeded", f"{method}: {where} did not answer within {timeout:.0f}s") from None
        except (OSError, http.client.HTTPException) as e:
            raise Unavailable("plane_unavailable", f"{method}: {where} is unreachable: {redact(_describe(e), secrets)}") from None
    finally:
        conn.close()
    try:
        obj = json.loads(data) if data else {}
    except ValueError:
        obj = None
    if resp.status == 200:
        if not isinstance(obj, dict):
            raise Bug(RPC_BUG_CODE, f"{method}: {where} sent an answer that is not a JSON object")
        return resp.status, obj
    if not isinstance(obj, dict) or not isinstance(obj.get("code"), str) or not obj["code"]:
        raise Bug(RPC_BUG_CODE, f"{method}: undecodable answer {resp.status} from {where}", status=resp.status)
    code, message = obj["code"], redact(str(obj.get("message") or ""), secrets)
    if "class" in obj:
        cls = RPC_CLASSES.get(obj["class"], Bug)  # a class this client does not know: drift
    elif code in RPC_OUTAGE_CODES:
        cls = Unavailable
    else:
        cls = Bug if code == RPC_BUG_CODE else Refused
    raise cls(code, f"{method}: {where}: {message}", status=resp.status)


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__
