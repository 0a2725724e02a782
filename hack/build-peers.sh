#!/usr/bin/env bash
# Builds the peers nodeqos is benchmarked against from the pinned module in
# hack/peers/ — the upstream kubernetes-sigs/descheduler binary (bench/peers.py)
# and the null scheduler extender, the floor bench/extender.py measures
# nodeqos-scheduler-extender against — in one `go build`, into a cache outside
# the repository keyed by a digest of hack/peers/ and this script, and prints
# the directory holding them. Separate from the control plane's build
# (hack/build-control-plane.sh): its own module, its own cache directory, built
# only when a benchmark asks. Idempotent; concurrent runs wait for one build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "build-peers: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH. Install Go >= 1.26 (https://go.dev/doc/install); the peers are built from source with it."

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cd "$here" && cat peers/go.mod peers/go.sum peers/nullextender/*.go build-peers.sh; go env GOVERSION GOOS GOARCH) \
       | sha256sum | cut -c1-16)
out="$cache_root/peers/$key"
binaries=(descheduler nullextender)
ready() { local b; for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || return 1; done; }
if ready; then echo "$out"; exit 0; fi

mkdir -p "$cache_root/peers"
exec 9>"$cache_root/peers/.lock"
flock 9
if ready; then echo "$out"; exit 0; fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
log="$out.tmp/build.log"
# Stamp the version the way descheduler's Makefile does (its `version` subcommand).
dver=$(awk '$1 == "sigs.k8s.io/descheduler" {print $2; exit}' "$here/peers/go.mod")
ldflags="-s -w -X sigs.k8s.io/descheduler/pkg/version.version=$dver"
echo "building descheduler $dver and nullextender into $out (first run only; a few minutes on 2 cores)" >&2
if ! (cd "$here/peers" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" \
        -o "$out.tmp/" sigs.k8s.io/descheduler/cmd/descheduler ./nullextender) >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "go build of the peers failed (full log: $log). Check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY)) and that Go is >= 1.26."
fi
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
