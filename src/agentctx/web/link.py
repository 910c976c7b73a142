"""A new one-time login link from the running dashboard: ``agentctx ui --link``.

The link ``agentctx ui`` prints works once, and the session cookie it is traded for ends with the
browser; another browser (or the same one restarted) needs a link of its own. While it serves,
``agentctx ui`` keeps ``state/ui.json`` in the agentctx home: its port, its process id and a control
secret random per start, written through ``core.files.write_atomic`` (mode 0600, in the home's
0700 folders), so only the user's own account can read it. ``agentctx ui --link`` reads the file and
POSTs the secret to ``/link`` on 127.0.0.1 at that port; the server answers a new one-time secret
(:class:`agentctx.web.security.Credentials`) and the client builds the link from it. The file is
removed when that server stops (by that server only: another ``agentctx ui`` may have replaced it).

Standard library only (with orjson): ``--link`` starts no web server and loads none of its modules.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re

import orjson

from agentctx.core import files, home
from agentctx.core.errors import AgentctxError

HOST = "127.0.0.1"
LOGIN_PATH = "/login"
LINK_PATH = "/link"
CONTROL_HEADER = "X-Agentctx-Control"
STATE_FILE = "ui.json"
STATE_MAX_BYTES = 4096
#: Seconds ``--link`` waits for the running server.
TIMEOUT = 10
_SECRET = re.compile(r"[A-Za-z0-9_-]{16,128}")


class NoDashboardError(AgentctxError):
    """``agentctx ui --link`` found no running dashboard to ask."""


def login_url(port: int, secret: str) -> str:
    """The one-time link that trades ``secret`` for a session cookie."""
    return f"http://{HOST}:{port}{LOGIN_PATH}?secret={secret}"


def state_path() -> str:
    """Where the running dashboard says where it is."""
    return os.path.join(home.sub("state"), STATE_FILE)


def publish(port: int, control: str) -> None:
    """Note the running dashboard (this process) for ``agentctx ui --link``."""
    home.ensure_sub("state")
    payload = {"pid": os.getpid(), "port": port, "control": control}
    files.write_atomic(state_path(), orjson.dumps(payload))


def withdraw(control: str) -> None:
    """Remove the note, if it is still this server's (``control``)."""
    if (read() or {}).get("control") == control:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_path())


def read() -> dict[str, object] | None:
    """The running dashboard's note, or None (no file, or not one we wrote)."""
    try:
        data = orjson.loads(files.read_bounded(state_path(), STATE_MAX_BYTES))
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another account's process: not the dashboard we started
        return False
    return True


def ask(timeout: float = TIMEOUT) -> str:
    """A new one-time link from the running dashboard; :class:`NoDashboardError` when none runs."""
    note = read()
    none = "no dashboard is running: start one with `agentctx ui`"
    if note is None:
        raise NoDashboardError(none)
    port, pid, control = note.get("port"), note.get("pid"), note.get("control")
    if not isinstance(port, int) or not isinstance(pid, int) or not isinstance(control, str):
        raise NoDashboardError(none)
    if not _alive(pid):
        raise NoDashboardError(f"{none} (the one on port {port} has stopped)")
    # http.client, not urllib: no proxy from the environment ever sees the control secret
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("POST", LINK_PATH, headers={CONTROL_HEADER: control, "Content-Length": "0"})
        response = conn.getresponse()
        body = response.read(STATE_MAX_BYTES)
    except OSError as exc:
        raise NoDashboardError(f"{none} (nothing answers on port {port}: {exc})") from exc
    finally:
        conn.close()
    try:
        secret = orjson.loads(body).get("secret") if response.status == 200 else None
    except (orjson.JSONDecodeError, AttributeError):
        secret = None
    if not isinstance(secret, str) or not _SECRET.fullmatch(secret):
        raise NoDashboardError(
            f"the program on port {port} gave no link (HTTP {response.status}): "
            "restart the dashboard with `agentctx ui`"
        )
    return login_url(port, secret)
