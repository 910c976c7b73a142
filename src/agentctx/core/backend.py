"""Which extraction backend runs, and why: the one place that decides it.

``extraction.backend`` in the config (``auto``, ``api``, ``claude-code``, ``off``), overridden by the
environment variable :data:`ENV_BACKEND`:

* ``api``: the Messages API with ``ANTHROPIC_API_KEY`` (:mod:`agentctx.extract.llm`);
* ``claude-code``: the user's own ``claude`` CLI and its login (:mod:`agentctx.extract.claude_code`),
  the binary at :data:`ENV_BIN`, else ``claude`` on ``PATH``;
* ``auto``: ``api`` when an API key is set; else ``claude-code`` when the binary is found and
  ``claude auth status`` (no model request) reports a login; else none: capture only;
* ``off``: no extraction.

Two ways to ask. The hooks ask :func:`quick` (no process, no network: a few stat calls) whether a
worker is worth starting; the workers and ``doctor`` ask :func:`resolve`, which runs
``claude auth status`` once for ``auto`` and ``claude-code``. Standard library only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

API = "api"
CLAUDE_CODE = "claude-code"
AUTO = "auto"
OFF = "off"
CHOICES = (AUTO, API, CLAUDE_CODE, OFF)
#: Overrides the ``extraction.backend`` setting.
ENV_BACKEND = "AGENTCTX_EXTRACTION_BACKEND"
#: The ``claude`` binary to run (else ``claude`` on PATH).
ENV_BIN = "AGENTCTX_CLAUDE_BIN"
#: Set on every ``claude`` child agentctx starts: ``agentctx hook …`` returns at once when it sees it,
#: so an extraction can never start another one through the user's hooks.
CHILD_MARKER = "AGENTCTX_EXTRACTION_CHILD"
#: Seconds ``claude auth status`` may take (measured 0.45 s; 1.7 s with an expired login).
AUTH_TIMEOUT_S = 20.0
#: Environment of Claude Code's hooks and tools that names the parent session: never passed on.
PARENT_IDENTITY = (
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_PID",
    "CLAUDE_PROJECT_DIR",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_CHILD_NOTES_DIR",
    "CLAUDE_CODE_SESSION_ATTENDED",
    "CLAUDE_CODE_MESSAGING_SOCKET",
    "CLAUDE_CODE_MESSAGING_TOKEN",
    "CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS",
    "CLAUDE_ENV_FILE",
    "CLAUDE_EFFORT",
)
#: Fixed environment of every child: no thinking, bounded output and retries, no CLAUDE.md, no
#: telemetry (offline it costs 1.5 s a call), no auto-update.
CHILD_ENV = {
    "CLAUDE_CODE_DISABLE_THINKING": "1",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "4096",
    "CLAUDE_CODE_MAX_RETRIES": "4",
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    CHILD_MARKER: "1",
}
#: ``claude auth status`` ``authMethod`` of a token that lives only in the shell's environment
#: (``claude setup-token``): Claude Code removes it from its hooks' environment.
SHELL_TOKEN_METHOD = "oauth_token"
#: ``authMethod`` of a login through an ``apiKeyHelper`` of the user settings.
HELPER_METHOD = "api_key_helper"


class Choice:
    """The backend that runs (None: capture only), why, and what the user should know."""

    __slots__ = ("auth", "backend", "binary", "configured", "reason", "warnings")

    def __init__(
        self,
        configured: str,
        backend: str | None,
        reason: str,
        *,
        binary: str | None = None,
        auth: dict[str, Any] | None = None,
        warnings: list[str] | None = None,
    ) -> None:
        self.configured = configured
        self.backend = backend
        self.reason = reason
        self.binary = binary
        self.auth = auth
        self.warnings = warnings or []

    @property
    def auth_method(self) -> str:
        """``authMethod`` of ``claude auth status`` ('' when not asked)."""
        value = (self.auth or {}).get("authMethod")
        return value if isinstance(value, str) else ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``doctor --json``)."""
        return {
            "configured": self.configured,
            "backend": self.backend,
            "reason": self.reason,
            "binary": self.binary,
            "auth_method": self.auth_method or None,
            "warnings": list(self.warnings),
        }


def configured(setting: str) -> str:
    """The backend asked for: the environment's :data:`ENV_BACKEND`, else the setting (an unknown
    value in the environment is ignored)."""
    value = os.environ.get(ENV_BACKEND, "").strip().lower()
    return value if value in CHOICES else setting


def api_key() -> bool:
    """Whether an API key for the ``api`` backend is set."""
    return bool(os.environ.get("ANTHROPIC_API_KEY", "").strip())


def claude_binary() -> str | None:
    """The ``claude`` CLI: :data:`ENV_BIN` when set (None if it is not an executable file), else
    ``claude`` on ``PATH``. A PATH scan of our own: ``shutil`` costs the hooks an import."""
    given = os.environ.get(ENV_BIN, "").strip()
    if given:
        return given if _executable(given) else None
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", "claude")
        if _executable(candidate):
            return candidate
    return None


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def quick(setting: str, llm_on: bool = True) -> str | None:
    """The backend a worker would likely use, without starting a process (for the hooks).

    ``auto`` with no API key answers ``claude-code`` when the binary exists: whether it is logged in
    is the worker's question (:func:`resolve`), not the hook's.
    """
    wanted = configured(setting)
    if not llm_on or wanted == OFF:
        return None
    if wanted == API:
        return API if api_key() else None
    if wanted == CLAUDE_CODE:
        return CLAUDE_CODE if claude_binary() else None
    if api_key():
        return API
    return CLAUDE_CODE if claude_binary() else None


def resolve(
    setting: str,
    llm_on: bool = True,
    *,
    status: Callable[[str], dict[str, Any] | None] | None = None,
) -> Choice:
    """The backend that runs and why; ``status`` asks the CLI for its login (default
    :func:`auth_status`)."""
    wanted = configured(setting)
    source = "from $" + ENV_BACKEND if os.environ.get(ENV_BACKEND, "").strip() else "configured"
    if not llm_on:
        return Choice(wanted, None, "llm is off in config: capture only")
    if wanted == OFF:
        return Choice(wanted, None, f"extraction.backend is off ({source}): capture only")
    if wanted == API:
        if api_key():
            return Choice(wanted, API, f"api ({source}) and ANTHROPIC_API_KEY is set")
        return Choice(wanted, None, f"api ({source}) but ANTHROPIC_API_KEY is not set")
    if wanted == AUTO and api_key():
        return Choice(wanted, API, "auto: ANTHROPIC_API_KEY is set")
    binary = claude_binary()
    prefix = "auto: no ANTHROPIC_API_KEY; " if wanted == AUTO else f"claude-code ({source}): "
    if binary is None:
        where = f"${ENV_BIN} ({os.environ[ENV_BIN]})" if os.environ.get(ENV_BIN) else "PATH"
        return Choice(wanted, None, f"{prefix}no claude CLI found on {where}")
    auth = (status or auth_status)(binary)
    if not auth or auth.get("loggedIn") is not True:
        return Choice(
            wanted, None, f"{prefix}{binary} is not logged in (claude auth status)",
            binary=binary, auth=auth,
        )  # fmt: skip
    choice = Choice(
        wanted,
        CLAUDE_CODE,
        f"{prefix}{binary} is logged in ({auth.get('authMethod', 'unknown method')})",
        binary=binary,
        auth=auth,
    )
    if choice.auth_method == SHELL_TOKEN_METHOD:
        choice.warnings.append(
            "the claude login is CLAUDE_CODE_OAUTH_TOKEN in this shell's environment: Claude Code "
            "removes it from its hooks, so the background workers will not reach it; run "
            "`claude login` (stored credentials work), or run `agentctx extract` from this shell"
        )
    return choice


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a ``claude`` child: ours without the parent session's identity, plus
    :data:`CHILD_ENV`."""
    env = {k: v for k, v in (os.environ if base is None else base).items()}
    for name in PARENT_IDENTITY:
        env.pop(name, None)
    env.update(CHILD_ENV)
    return env


def auth_status(binary: str, timeout: float = AUTH_TIMEOUT_S) -> dict[str, Any] | None:
    """``claude auth status`` as data (no model request), or None when it cannot tell."""
    import subprocess

    from agentctx.core import jsonio

    try:
        done = subprocess.run(
            [binary, "auth", "status"],
            env=child_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    try:
        data = jsonio.loads(done.stdout.decode("utf-8", "replace"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
