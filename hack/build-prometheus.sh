#!/usr/bin/env bash
# Builds the real prometheus (github.com/prometheus/prometheus, pinned in
# hack/prometheus/go.mod) into a cache outside the repository keyed by a
# digest of the module and this script, and prints the directory holding it.
# The metricsUtilization Prometheus test (tests/e2e_metrics) runs it against a
# scrape target of its own. Its own module so pinning it does not
# rebuild the other peers (hack/build-peers.sh). Idempotent; concurrent runs
# wait for one build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "build-prometheus: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH. Install Go >= 1.26 (https://go.dev/doc/install)."

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cd "$here" && cat prometheus/go.mod prometheus/go.sum build-prometheus.sh; go env GOVERSION GOOS GOARCH) \
       | sha256sum | cut -c1-16)
out="$cache_root/prometheus/$key"
if [[ -x "$out/prometheus" ]]; then echo "$out"; exit 0; fi

mkdir -p "$cache_root/prometheus"
exec 9>"$cache_root/prometheus/.lock"
flock 9
if [[ -x "$out/prometheus" ]]; then echo "$out"; exit 0; fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
log="$out.tmp/build.log"
ver=$(awk '$1 == "github.com/prometheus/prometheus" {print $2; exit}' "$here/prometheus/go.mod")
echo "building prometheus $ver into $out (first run only; a few minutes on 2 cores)" >&2
if ! (cd "$here/prometheus" && go build -ldflags="-s -w" \
        -o "$out.tmp/" github.com/prometheus/prometheus/cmd/prometheus) >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "go build of prometheus failed (full log: $log). Check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY))."
fi
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
