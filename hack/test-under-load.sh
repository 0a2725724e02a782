#!/usr/bin/env bash
# `make test` beside a noisy neighbour, as CI machines are shared and busy:
# stress-ng with two CPU hogs, two sync() loops and one 256 MiB disk writer
# (STRESS_ARGS overrides), installed by hack/host-setup.sh when missing. stress-ng is
# stopped when the tests end, whatever the outcome (and on Ctrl-C); its
# scratch files go to a temporary directory that is removed too. The exit
# status is make test's. PYTEST_ARGS is passed on to make test.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
stress_args=${STRESS_ARGS:---cpu 2 --io 2 --hdd 1 --hdd-bytes 256M}

fail() { echo "test-under-load: $*" >&2; exit 1; }

"$repo/hack/host-setup.sh" load || fail "stress-ng could not be installed (above)"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/nodeqos-stress.XXXXXX")
stress_pid=
stop_stress() {
  if [[ -n "$stress_pid" ]]; then
    # its own process group (setsid): the parent and every stressor it forked
    kill -TERM -- "-$stress_pid" 2>/dev/null || kill -TERM "$stress_pid" 2>/dev/null || true
    wait "$stress_pid" 2>/dev/null || true
    echo "test-under-load: stopped stress-ng (pid $stress_pid)" >&2
    stress_pid=
  fi
  rm -rf "$scratch"
}
trap stop_stress EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck disable=SC2086 # STRESS_ARGS is a list of flags
setsid stress-ng $stress_args --temp-path "$scratch" >"$scratch/stress-ng.log" 2>&1 &
stress_pid=$!
sleep 1
kill -0 "$stress_pid" 2>/dev/null || fail "stress-ng did not start: $(cat "$scratch/stress-ng.log")"
echo "test-under-load: stress-ng $stress_args running (pid $stress_pid)" >&2

"${MAKE:-make}" -C "$repo" test
