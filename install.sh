#!/bin/sh
# Install agentctx from this clone as a command-line tool in its own environment, then run
# `agentctx init` (arguments are passed to it). Needs only Python >= 3.11 and the package index:
# uv is used when present, else pipx; with neither, uv is first put into its own environment
# under ${XDG_DATA_HOME:-~/.local/share}/agentctx-cc/uv (from PyPI). Where something is missing
# that this script cannot install, it stops with the exact command to run.
set -eu
cd "$(dirname "$0")"

say() { printf 'agentctx install: %s\n' "$*" >&2; }

python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
    say "Python 3.11 or newer is needed: sudo apt-get install python3 python3-venv"
    exit 1
fi
python=$(command -v "$python")
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    say "Python 3.11 or newer is needed; $python is $("$python" -V 2>&1). Run this with PYTHON=<python3.11+>."
    exit 1
fi

data=${XDG_DATA_HOME:-$HOME/.local/share}/agentctx-cc
uv=${UV:-}
if [ -z "$uv" ] && command -v uv >/dev/null 2>&1; then uv=$(command -v uv); fi
if [ -z "$uv" ] && [ -x "$data/uv/bin/uv" ]; then uv=$data/uv/bin/uv; fi

if [ -z "$uv" ] && command -v pipx >/dev/null 2>&1; then
    say "installing with pipx"
    pipx install --force --python "$python" .
    exec "${PIPX_BIN_DIR:-$HOME/.local/bin}/agentctx" init "$@"
fi

if [ -z "$uv" ]; then
    say "neither uv nor pipx found: installing uv into $data/uv (from PyPI)"
    if ! "$python" -m venv "$data/uv" >/dev/null 2>&1; then
        rm -rf "$data/uv"
        say "$python cannot create a virtual environment; run: sudo apt-get install python3-venv"
        exit 1
    fi
    "$data/uv/bin/python" -m pip install -q --disable-pip-version-check uv
    uv=$data/uv/bin/uv
fi

say "installing with $uv"
"$uv" tool install --quiet --python "$python" --reinstall-package agentctx-cc .
exec "$("$uv" tool dir --bin)/agentctx" init "$@"
