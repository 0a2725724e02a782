#!/usr/bin/env bash
# Runs a command inside nodeqos's development environment, setting it up first:
#   1. a virtual environment cached outside the repo (keyed by pyproject.toml),
#      with nodeqos installed editable from this checkout;
#   2. the control plane binaries (hack/build-control-plane.sh), exported as
#      NODEQOS_CONTROL_PLANE_BIN.
# Both steps are idempotent; a second run only checks stamps.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
python=${PYTHON:-python3}

fail() { echo "nodeqos setup: $*" >&2; exit 1; }

command -v "$python" >/dev/null 2>&1 || fail "no $python on PATH; install Python >= 3.11"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || fail "$("$python" --version 2>&1) is too old; nodeqos needs Python >= 3.11 (set PYTHON=/path/to/python3.11)"

key=$( (cat "$repo/pyproject.toml"; "$python" --version) | sha256sum | cut -c1-16)
venv="$cache_root/venv/$key"
# Built in place (console-script shebangs hold absolute paths, so a venv cannot
# be moved), under a lock, and trusted only once its completion stamp exists.
if [[ ! -f "$venv/.nodeqos-complete" ]]; then
  mkdir -p "$cache_root/venv"
  exec 8>"$cache_root/venv/.lock"
  flock 8
  if [[ ! -f "$venv/.nodeqos-complete" ]]; then
    echo "creating virtual environment $venv" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv" || fail "python -m venv failed (on Debian: apt-get install python3-venv)"
    "$venv/bin/python" -m pip install --quiet --upgrade pip "setuptools>=77" wheel >&2
    "$venv/bin/python" -m pip install --quiet "$repo[test]" >&2 \
      || fail "pip install failed; check that PyPI is reachable"
    touch "$venv/.nodeqos-complete"
  fi
  flock -u 8
fi
# The editable install points at one checkout; re-point it when the repo moved
# (a fresh clone in CI) without reinstalling the dependencies.
stamp="$venv/.nodeqos-editable"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$repo" ]]; then
  exec 8>"$cache_root/venv/.lock"
  flock 8
  if [[ "$(cat "$stamp" 2>/dev/null)" != "$repo" ]]; then
    "$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e "$repo" >&2 \
      || fail "editable install of $repo failed"
    echo "$repo" > "$stamp"
  fi
  flock -u 8
fi
# Several checkouts (git worktrees, a CI clone beside a dev tree) may share one
# venv; PYTHONPATH makes this checkout's code win in every process we start,
# console scripts included, whichever checkout the editable install points at.
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"

# NODEQOS_SKIP_CONTROL_PLANE=1 is for quick unit-only runs; tests that need the
# control plane then fail saying how to build it.
if [[ -z "${NODEQOS_SKIP_CONTROL_PLANE:-}" ]]; then
  bin=$("$repo/hack/build-control-plane.sh")
  export NODEQOS_CONTROL_PLANE_BIN="$bin"
fi
export PATH="$venv/bin:$PATH"
export VIRTUAL_ENV="$venv"
cd "$repo"
exec "$@"
