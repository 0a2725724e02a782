#!/usr/bin/env bash
# Runs a command inside nodeqos's development environment, setting it up first:
#   0. the host packages of the one list hack/host-packages.txt (hack/host-setup.sh:
#      apt-get as root when one is missing; without root it names what is missing
#      and carries on, and the tests that need it fail saying so);
#   1. a virtual environment of this checkout, cached outside the repo (keyed
#      by the checkout's path and pyproject.toml), with nodeqos installed
#      editable from it, over a venv of the dependencies that all checkouts
#      share (keyed by the requirements; a second checkout's venv takes
#      seconds, offline);
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

# Host packages first, so no test depends on another having installed them.
# NODEQOS_SKIP_HOST_SETUP=1 is for tests that run this script with a bare PATH.
[[ -n "${NODEQOS_SKIP_HOST_SETUP:-}" ]] || "$repo/hack/host-setup.sh" --warn || fail "host setup failed (above)"

# The wheels of every dependency, shared by all checkouts, keyed by what pip
# installs (the requirements in pyproject.toml) and the Python version.
mapfile -t requirements < <("$python" - "$repo/pyproject.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    doc = tomllib.load(f)
project = doc.get("project", {})
extras = project.get("optional-dependencies", {})
build = ["pip", "wheel", *doc["build-system"]["requires"]]
for req in [*build, *project.get("dependencies", []), *extras.get("test", [])]:
    print(req)
PY
)
((${#requirements[@]} > 3)) || fail "could not read the requirements in $repo/pyproject.toml"
deps_key=$( (printf '%s\n' "${requirements[@]}"; "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
wheels="$cache_root/wheels/$deps_key"
deps="$cache_root/deps/$deps_key"
# One thin virtual environment per checkout (its path and pyproject.toml),
# with nodeqos installed editable from it, over the dependencies' venv that
# all checkouts share read-only (a .pth file puts its site-packages on the
# path): two checkouts running at once never share an install, and a new
# checkout's venv takes seconds.
key=$( (cat "$repo/pyproject.toml"; "$python" --version; echo "$repo") | sha256sum | cut -c1-16)
venv="$cache_root/venv/$key"
pip_quiet=(--quiet --disable-pip-version-check)
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$cache_root/pip}"

site_packages() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))'; }

# The dependencies' venv: every requirement, from wheels downloaded (or built)
# once into $wheels. Immutable once complete.
build_deps() {
  [[ -f "$deps/.nodeqos-complete" ]] && return 0
  echo "creating the dependencies' virtual environment $deps" >&2
  rm -rf "$deps"
  "$python" -m venv "$deps" || fail "python -m venv failed (on Debian: apt-get install python3-venv)"
  if [[ ! -f "$wheels/.nodeqos-complete" ]]; then
    echo "downloading the dependencies' wheels into $wheels" >&2
    rm -rf "$wheels" "$wheels.tmp"
    mkdir -p "$wheels.tmp"
    "$deps/bin/python" -m pip wheel "${pip_quiet[@]}" --wheel-dir "$wheels.tmp" "${requirements[@]}" >&2 \
      || fail "pip wheel failed; check that PyPI is reachable"
    touch "$wheels.tmp/.nodeqos-complete"
    mv "$wheels.tmp" "$wheels"
  fi
  "$deps/bin/python" -m pip install "${pip_quiet[@]}" --no-index --find-links "$wheels" \
      --upgrade "${requirements[@]}" >&2 \
    || fail "pip install from $wheels failed (make clean-cache and retry)"
  touch "$deps/.nodeqos-complete"
}

# This checkout's venv: the dependencies' site-packages by a .pth file, their
# console scripts (pytest, mypy, ruff, ...) re-pointed at this venv's python,
# nodeqos installed editable.
build_venv() {
  local dep_site script
  echo "creating virtual environment $venv for $repo" >&2
  rm -rf "$venv"
  "$python" -m venv --without-pip "$venv" || fail "python -m venv failed (on Debian: apt-get install python3-venv)"
  echo "$repo" > "$venv/.nodeqos-checkout"
  dep_site=$(site_packages "$deps")
  echo "$dep_site" > "$(site_packages "$venv")/_nodeqos_deps.pth"
  for script in "$deps"/bin/*; do
    case ${script##*/} in python* | activate* | Activate* | pip*) continue ;; esac
    if head -n 1 "$script" | grep -qaE '^#!.*/bin/python[0-9.]*$'; then
      { echo "#!$venv/bin/python"; tail -n +2 "$script"; } > "$venv/bin/${script##*/}"
      chmod +x "$venv/bin/${script##*/}"
    else
      ln -s "$script" "$venv/bin/${script##*/}"  # a binary (ruff)
    fi
  done
  "$venv/bin/python" -m pip install "${pip_quiet[@]}" --no-index --no-build-isolation --no-deps \
      -e "$repo" >&2 || fail "editable install of $repo failed"
  echo "$deps" > "$venv/.nodeqos-deps"
  touch "$venv/.nodeqos-complete"
}

# Removes the venvs of checkouts that no longer exist and this checkout's
# venvs of older pyproject.toml versions, then the dependencies' venvs no
# venv uses. Venvs without a checkout stamp (the shared ones of older
# versions of this script, maybe in use by a checkout that has not pulled
# this change) are left alone.
prune() {
  local dir checkout used=" $deps "
  for dir in "$cache_root"/venv/*/; do
    dir=${dir%/}
    [[ "$dir" == "$venv" || ! -f "$dir/.nodeqos-checkout" ]] && continue
    checkout=$(cat "$dir/.nodeqos-checkout")
    if [[ ! -d "$checkout" || "$checkout" == "$repo" ]]; then
      echo "removing $dir, the venv of $checkout ($([[ -d "$checkout" ]] && echo "an older pyproject.toml" || echo "gone"))" >&2
      rm -rf "$dir"
    elif [[ -f "$dir/.nodeqos-deps" ]]; then
      used+="$(cat "$dir/.nodeqos-deps") "
    fi
  done
  for dir in "$cache_root"/deps/*/; do
    dir=${dir%/}
    [[ -d "$dir" && "$used" != *" $dir "* ]] && { echo "removing $dir (no venv uses it)" >&2; rm -rf "$dir"; }
  done
  return 0
}

# Built in place (console-script shebangs hold absolute paths, so a venv cannot
# be moved), under a lock, and trusted only once its completion stamp and its
# dependencies' exist.
ready() { [[ -f "$venv/.nodeqos-complete" && -f "$deps/.nodeqos-complete" ]]; }
if ! ready; then
  mkdir -p "$cache_root/venv" "$cache_root/deps" "$cache_root/wheels"
  exec 8>"$cache_root/venv/.lock"
  flock 8
  if ! ready; then
    prune
    build_deps
    build_venv
  fi
  flock -u 8
fi
# The venv is this checkout's, but a test's subprocess (`python -m tests...`)
# needs the checkout on its path too, whatever its working directory.
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
