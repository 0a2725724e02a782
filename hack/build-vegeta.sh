#!/usr/bin/env bash
# Builds vegeta (github.com/tsenart/vegeta/v12, pinned in hack/vegeta/go.mod), the
# open-loop HTTP load generator of `python -m bench interference`, into a cache
# outside the repository keyed by a digest of the module and this script, and
# prints the directory holding it. Its own module so pinning it rebuilds nothing
# else (hack/build-peers.sh, hack/build-metrics-server.sh). Idempotent; concurrent
# runs wait for one build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "build-vegeta: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH. Install Go >= 1.26 (https://go.dev/doc/install)."

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cd "$here" && cat vegeta/go.mod vegeta/go.sum build-vegeta.sh; go env GOVERSION GOOS GOARCH) \
       | sha256sum | cut -c1-16)
out="$cache_root/vegeta/$key"
if [[ -x "$out/vegeta" ]]; then echo "$out"; exit 0; fi

mkdir -p "$cache_root/vegeta"
exec 9>"$cache_root/vegeta/.lock"
flock 9
if [[ -x "$out/vegeta" ]]; then echo "$out"; exit 0; fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
log="$out.tmp/build.log"
ver=$(awk '$1 == "github.com/tsenart/vegeta/v12" {print $2; exit}' "$here/vegeta/go.mod")
echo "building vegeta $ver into $out (first run only; about a minute on 2 cores)" >&2
if ! (cd "$here/vegeta" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" \
        -o "$out.tmp/vegeta" github.com/tsenart/vegeta/v12) >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "go build of vegeta failed (full log: $log). Check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY))."
fi
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
