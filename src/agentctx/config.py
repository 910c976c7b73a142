"""Settings: a small JSON file in the home, read by every process, written only by ``config set``.

Standard library only, and no ``json`` module on the read path: hooks read it (Stop reads ``llm``
to decide whether to start extraction, UserPromptSubmit ``retrieval.min_relevance``), and
``import json`` costs the prompt hook more than its query (benchmarks/results/hooks.md lists the
import times), so the file is parsed by the hooks' json-free reader. Keys are flat and dotted; each has a kind and a default, so a bad key or value is refused
before anything is written. Unknown keys found in the file are kept (a newer agentctx may have
written them) but not used.
"""

from __future__ import annotations

import math
import os

from agentctx.core import home
from agentctx.core.errors import ConfigError, UnsafeHomeError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_TRUE = {"on", "true", "yes", "1"}
_FALSE = {"off", "false", "no", "0"}

#: key -> (kind, default, meaning). docs/generate.py writes the settings table of docs/spec.md (§2)
#: from this, so the meaning is the documentation: one line, no trailing period.
SETTINGS: dict[str, tuple[str, Any, str]] = {
    "llm": ("bool", True, "LLM extraction of records from transcripts (Claude Haiku)"),
    "llm.model": (
        "str",
        "claude-haiku-4-5",
        "model for extraction, merge checks and retrieval cues",
    ),
    "extraction.backend": (
        "auto|api|claude-code|off",
        "auto",
        "who makes the extraction calls: `api` (ANTHROPIC_API_KEY), `claude-code` (the user's own "
        "`claude` login), `auto` (api with a key, else a logged-in claude CLI) or `off`; "
        "$AGENTCTX_EXTRACTION_BACKEND overrides it",
    ),
    "extraction.daily_calls": (
        "int",
        300,
        "most extraction calls a day through the claude-code backend (the subscription's quota is "
        "shared with your own work); more waits for the next day",
    ),
    "extraction.daily_tokens": (
        "int",
        4_000_000,
        "most input and output tokens a day through the claude-code backend",
    ),
    "extraction.session_calls": (
        "int",
        40,
        "most extraction calls a day for one session through the claude-code backend",
    ),
    "embeddings": ("bool", True, "local embeddings for consolidation and hybrid search"),
    "embedding.model": ("str", "sentence-transformers/all-MiniLM-L6-v2", "fastembed model name"),
    "embedding.path": ("str", "", "a local model folder to load instead of downloading"),
    "embedding.int8": (
        "bool",
        True,
        "run the model's int8 variant, 8-bit weights derived once (all-MiniLM-L6-v2: about 60 MB "
        "less); off runs it in fp32",
    ),
    "reinforcement_threshold": (
        "int",
        3,
        "distinct sessions an inferred preference must appear in before it counts as reinforced",
    ),
    "team_export": (
        "bool",
        False,
        "keep `.agentctx/context.md` (the shareable records) in each project's root",
    ),
    "digest.handover_max_age_days": (
        "int",
        14,
        "days after which a handover no longer reaches the session digest (a later session of "
        "its checkout that ended stales it sooner)",
    ),
    "retrieval.min_relevance": (
        "float",
        0.3,
        "relevance floor of the prompt hook: the share of a prompt's term weight a record must "
        "match (0.1 more for a record with retrieval cues; 0 = no floor); ctx_search keeps from "
        "the lower of this and 0.2 and labels its hits",
    ),
    "retrieval.auto_calibrate": (
        "bool",
        True,
        "let consolidation calibrate the prompt hook's relevance thresholds from the injection "
        "verdicts (at least 50, within bounds, logged); off uses the configured values, and a "
        "threshold you set yourself is never calibrated",
    ),
    "retrieval.min_similarity": (
        "float",
        0.0,
        "cosine floor of ctx_search's vector hits (0 = the embedding model's measured or "
        "calibrated floor, none for a model with neither)",
    ),
}


#: settings an environment variable overrides (``config get`` names it as the value's source)
ENV_OVERRIDES: dict[str, str] = {"extraction.backend": "AGENTCTX_EXTRACTION_BACKEND"}


def load(path: str | None = None) -> dict[str, Any]:
    """Every setting with defaults filled in.

    A corrupt or unreadable file does not turn features off: every setting takes its default, the
    problem goes to ``logs/hooks.log`` and ``doctor`` reports it (issue 16, finding 7).
    """
    values = {key: spec[1] for key, spec in SETTINGS.items()}
    try:
        stored = _read(path or home.config_path())
    except ConfigError as exc:
        _log(f"{exc}; using the default settings")
        return values
    for key, value in stored.items():
        if key in SETTINGS:
            try:
                values[key] = coerce(key, value)
            except ConfigError:
                continue  # a hand-edited bad value falls back to the default; `doctor` reports it
    return values


def get(key: str, path: str | None = None) -> Any:
    """One setting's value."""
    _spec(key)
    return load(path)[key]


def set_value(key: str, raw: str | bool | int, path: str | None = None) -> Any:
    """Validate and store one setting atomically; return the stored value."""
    value = coerce(key, raw)
    target = path or home.config_path()
    stored = _read(target)
    stored[key] = value
    _write(target, stored, create_home=path is None)
    return value


def _write(target: str, stored: dict[str, Any], *, create_home: bool) -> None:
    """The settings file, atomically and owner-only (0600)."""
    if create_home:
        home.ensure_home()
    else:
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
    import json  # only here: the read path must not load it (module docstring)

    from agentctx.core import files

    data = (json.dumps(stored, indent=2, sort_keys=True) + "\n").encode()
    files.write_atomic(target, data, mode=0o600)


def coerce(key: str, raw: Any) -> Any:
    """The typed value of ``raw`` for ``key``, or :class:`ConfigError`."""
    kind = _spec(key)[0]
    if "|" in kind:  # one of the listed names
        text = str(raw).strip().lower() if not isinstance(raw, bool) else ""
        if text not in kind.split("|"):
            raise ConfigError(f"{key} takes one of {kind.replace('|', ', ')} (got {raw!r})")
        return text
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ConfigError(f"{key} takes on or off (got {raw!r})")
    if kind == "float":
        try:
            share = float(str(raw).strip()) if not isinstance(raw, bool) else math.nan
        except ValueError:
            share = math.nan
        if not 0.0 <= share <= 1.0:  # NaN fails this too
            raise ConfigError(f"{key} takes a number from 0 to 1 (got {raw!r})")
        return share
    if kind == "int":
        try:
            number = int(str(raw).strip()) if not isinstance(raw, bool) else None
        except ValueError:
            number = None
        if number is None or number < 1:
            raise ConfigError(f"{key} takes a whole number of at least 1 (got {raw!r})")
        return number
    if not isinstance(raw, str):
        raise ConfigError(f"{key} takes text (got {raw!r})")
    text = raw.strip()
    if not text and SETTINGS[key][1]:  # a name with a non-empty default cannot be blanked
        raise ConfigError(f"{key} takes a non-empty name (the default is {SETTINGS[key][1]!r})")
    return text


def write_defaults(path: str | None = None) -> list[str]:
    """Add every setting missing from the file with its default (``agentctx init``), keeping the
    values already there; return the keys added (none: the file is left untouched).

    A file that cannot be read is left alone (``doctor`` reports it), and nothing is added.
    """
    target = path or home.config_path()
    try:
        stored = _read(target)
    except ConfigError:
        return []
    added = [key for key in SETTINGS if key not in stored]
    if not added:
        return []
    stored.update({key: SETTINGS[key][1] for key in added})
    _write(target, stored, create_home=path is None)
    return added


def explain(path: str | None = None) -> list[dict[str, Any]]:
    """Every setting with its value, default and source, for ``config get``.

    ``source`` is ``default`` (not in the file), ``config file`` or ``environment`` (``$NAME``, an
    override of :data:`ENV_OVERRIDES`, whose value is then the variable's).
    """
    target = path or home.config_path()
    try:
        stored = _read(target)
    except ConfigError:
        stored = {}
    values = load(path)
    rows = []
    for key, (_kind, default, _meaning) in SETTINGS.items():
        value, source = values[key], "default"
        if key in stored:
            try:
                coerce(key, stored[key])
                source = "config file"
            except ConfigError:
                pass  # a bad stored value: the default is used (doctor says so)
        variable = ENV_OVERRIDES.get(key)
        if variable and os.environ.get(variable, "").strip():
            value, source = os.environ[variable].strip().lower(), f"environment ${variable}"
        rows.append({"key": key, "value": value, "default": default, "source": source})
    return rows


def problems(path: str | None = None) -> list[str]:
    """What is wrong with the stored file (for ``doctor``); empty when all is well."""
    try:
        stored = _read(path or home.config_path())
    except UnsafeHomeError as exc:
        return [str(exc)]
    except ConfigError as exc:
        return [f"{exc}; every setting takes its default until then"]
    found = []
    for key, value in stored.items():
        if key not in SETTINGS:
            found.append(f"unknown key {key!r} (ignored)")
            continue
        try:
            coerce(key, value)
        except ConfigError as exc:
            found.append(f"{exc}; the default is used")
    return found


def _log(message: str) -> None:
    """One line in ``<home>/logs/hooks.log`` (the log every hook and worker writes); never raises."""
    import time

    from agentctx.core import nofollow

    try:
        path = os.path.join(home.ensure_sub("logs"), "hooks.log")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        fd = nofollow.append_fd(path)
        try:
            line = " ".join(message.split())
            os.write(fd, f"{stamp} config - {line}\n".encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass


def _spec(key: str) -> tuple[str, Any, str]:
    try:
        return SETTINGS[key]
    except KeyError:
        raise ConfigError(f"unknown setting {key!r}; known: {', '.join(SETTINGS)}") from None


#: A settings file is a few hundred bytes; past this it is not ours.
MAX_CONFIG_BYTES = 1024 * 1024


def _read(path: str) -> dict[str, Any]:
    from agentctx.core import jsonio, nofollow

    if os.path.abspath(path) == home.config_path():
        home.require()  # a config another account owns or can write is refused, not read
    try:
        data = jsonio.loads(nofollow.read_text(path, MAX_CONFIG_BYTES))  # never through a link
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or delete the file") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object; fix or delete the file")
    return data
