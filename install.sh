#!/bin/sh
# Install agentctx from this clone as a command-line tool in its own environment, then run
# `agentctx init` (arguments are passed to it) in the folder this was started from. Needs only
# Python >= 3.11 and the package index: uv is used when present, else pipx; with neither, uv is
# first put into its own environment under ${XDG_DATA_HOME:-~/.local/share}/agentctx-cc/uv (from
# PyPI). Where something is missing that this script cannot install, it stops with the exact
# command to run.
#
# `sh install.sh --uninstall [--yes]` removes what the install added: agentctx's registrations,
# plugin and data (`agentctx uninstall --all`, which asks before deleting data), the tool, and
# the uv and download cache this script brought.
set -eu
start=$(pwd)
cd "$(dirname "$0")"

say() { printf 'agentctx install: %s\n' "$*" >&2; }

data=${XDG_DATA_HOME:-$HOME/.local/share}/agentctx-cc
# uv's downloads for this install go under $data, so that --uninstall can take them back
# (a cache the user chose with UV_CACHE_DIR stays theirs).
own_cache=""
if [ -z "${UV_CACHE_DIR:-}" ]; then own_cache=$data/cache; fi
export UV_CACHE_DIR="${UV_CACHE_DIR:-$data/cache}"
uv=${UV:-}
if [ -z "$uv" ] && command -v uv >/dev/null 2>&1; then uv=$(command -v uv); fi
if [ -z "$uv" ] && [ -x "$data/uv/bin/uv" ]; then uv=$data/uv/bin/uv; fi

if [ "${1:-}" = "--uninstall" ]; then
    shift
    agentctx=""
    if [ -n "$uv" ] && [ -x "$("$uv" tool dir --bin 2>/dev/null)/agentctx" ]; then
        agentctx=$("$uv" tool dir --bin)/agentctx
    elif [ -x "${PIPX_BIN_DIR:-$HOME/.local/bin}/agentctx" ]; then
        agentctx=${PIPX_BIN_DIR:-$HOME/.local/bin}/agentctx
    fi
    if [ -n "$agentctx" ]; then
        (cd "$start" && AGENTCTX_INSTALL_SCRIPT=1 "$agentctx" uninstall --all "$@")
    else
        say "no installed agentctx command found: nothing registered to remove"
    fi
    if [ -n "$uv" ] && "$uv" tool list 2>/dev/null | grep -q '^agentctx-cc '; then
        tools=$("$uv" tool dir)
        "$uv" tool uninstall agentctx-cc >/dev/null 2>&1 && say "removed the tool (uv tool uninstall agentctx-cc)"
        # uv's tool folder, when no other tool is left in it (only its lock and ignore files)
        if [ -d "$tools" ] && [ -z "$(find "$tools" -mindepth 1 -maxdepth 1 -type d)" ]; then
            rm -rf "$tools"
            rmdir "$(dirname "$tools")" 2>/dev/null || true
        fi
        rmdir "$("$uv" tool dir --bin)" 2>/dev/null || true
    elif command -v pipx >/dev/null 2>&1 && pipx list --short 2>/dev/null | grep -q '^agentctx-cc '; then
        pipx uninstall agentctx-cc >/dev/null && say "removed the tool (pipx uninstall agentctx-cc)"
    fi
    if [ -d "$data" ]; then
        rm -rf "$data" && say "removed $data (the uv and the downloads this script brought)"
    fi
    exit 0
fi

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

if [ -z "$uv" ] && command -v pipx >/dev/null 2>&1; then
    say "installing with pipx"
    pipx install --force --python "$python" .
    cd "$start"
    exec "${PIPX_BIN_DIR:-$HOME/.local/bin}/agentctx" init "$@"
fi

if [ -z "$uv" ]; then
    say "neither uv nor pipx found: installing uv into $data/uv (from PyPI)"
    if ! "$python" -m venv "$data/uv" >/dev/null 2>&1; then
        rm -rf "$data/uv"
        say "$python cannot create a virtual environment; run: sudo apt-get install python3-venv"
        exit 1
    fi
    "$data/uv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir uv
    # uv is one static binary: the pip (and setuptools) that installed it are ~25 MB of nothing
    "$data/uv/bin/python" -m pip uninstall -q -y --disable-pip-version-check pip setuptools \
        >/dev/null 2>&1 || true
    uv=$data/uv/bin/uv
fi

say "installing with $uv"
"$uv" tool install --quiet --python "$python" --reinstall-package agentctx-cc .
# uv hardlinks (or copies) the tool's files out of its cache, so the cache this script chose is
# no longer needed: ~280 MB that share their blocks with the tool, plus ~20 MB of their own
# (benchmarks/results/install_size.md). Kept when the tool's files are links into it.
if [ -n "$own_cache" ] && [ "${UV_LINK_MODE:-}" != symlink ] && [ -d "$own_cache" ]; then
    rm -rf "$own_cache"
    rmdir "$data" 2>/dev/null || true
fi
bin=$("$uv" tool dir --bin)
cd "$start"
exec "$bin/agentctx" init "$@"
