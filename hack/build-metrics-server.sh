#!/usr/bin/env bash
# Builds the real metrics-server (sigs.k8s.io/metrics-server, pinned in
# hack/metricsserver/go.mod) into a cache outside the repository keyed by a
# digest of the module and this script, and prints the directory holding it.
# The usage-based LowNodeUtilization tests (source: KubernetesMetrics) run it
# against the real local nodes' kubelets. Its own module so pinning it does not
# rebuild the other peers (hack/build-peers.sh). Idempotent; concurrent runs
# wait for one build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "build-metrics-server: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH. Install Go >= 1.26 (https://go.dev/doc/install)."

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cd "$here" && cat metricsserver/go.mod metricsserver/go.sum build-metrics-server.sh; go env GOVERSION GOOS GOARCH) \
       | sha256sum | cut -c1-16)
out="$cache_root/metrics-server/$key"
if [[ -x "$out/metrics-server" ]]; then echo "$out"; exit 0; fi

mkdir -p "$cache_root/metrics-server"
exec 9>"$cache_root/metrics-server/.lock"
flock 9
if [[ -x "$out/metrics-server" ]]; then echo "$out"; exit 0; fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
log="$out.tmp/build.log"
ver=$(awk '$1 == "sigs.k8s.io/metrics-server" {print $2; exit}' "$here/metricsserver/go.mod")
echo "building metrics-server $ver into $out (first run only; a few minutes on 2 cores)" >&2
if ! (cd "$here/metricsserver" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" \
        -o "$out.tmp/" sigs.k8s.io/metrics-server/cmd/metrics-server) >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "go build of metrics-server failed (full log: $log). Check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY))."
fi
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
