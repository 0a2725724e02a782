#!/usr/bin/env bash
# Builds etcd and kube-apiserver from the pinned modules in hack/go.mod into a
# cache outside the repository, keyed by the go.sum digest, and prints the
# directory holding both binaries. Idempotent: a second run prints the cached
# directory at once.
#
# Honours the envtest conventions: when KUBEBUILDER_ASSETS, or both
# TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD, point at prebuilt binaries,
# nothing is built.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

fail() { echo "build-control-plane: $*" >&2; exit 1; }

if [[ -n "${TEST_ASSET_KUBE_APISERVER:-}" && -n "${TEST_ASSET_ETCD:-}" ]]; then
  [[ -x "$TEST_ASSET_KUBE_APISERVER" ]] || fail "TEST_ASSET_KUBE_APISERVER=$TEST_ASSET_KUBE_APISERVER is not an executable file"
  [[ -x "$TEST_ASSET_ETCD" ]] || fail "TEST_ASSET_ETCD=$TEST_ASSET_ETCD is not an executable file"
  echo "envtest assets: $TEST_ASSET_KUBE_APISERVER, $TEST_ASSET_ETCD" >&2
  exit 0
fi
if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  for b in kube-apiserver etcd; do
    [[ -x "$KUBEBUILDER_ASSETS/$b" ]] || fail "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no executable $b"
  done
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH. Install Go >= 1.24 (https://go.dev/doc/install), or set KUBEBUILDER_ASSETS to a directory holding prebuilt kube-apiserver and etcd binaries."

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cat "$here/go.mod" "$here/go.sum"; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-16)
out="$cache_root/control-plane/$key"
if [[ -x "$out/kube-apiserver" && -x "$out/etcd" ]]; then
  echo "$out"
  exit 0
fi

# Several processes (parallel test runs, the demo) may ask at once: one builds,
# the others wait for it and then find the cache filled.
mkdir -p "$cache_root/control-plane"
exec 9>"$cache_root/control-plane/.lock"
flock 9
if [[ -x "$out/kube-apiserver" && -x "$out/etcd" ]]; then
  echo "$out"
  exit 0
fi
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
echo "building etcd and kube-apiserver into $out (first run only, several minutes)" >&2
log="$out.tmp/build.log"
if ! (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out.tmp/etcd" ./cmd/etcd \
      && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out.tmp/kube-apiserver" ./cmd/kube-apiserver) >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "go build failed (full log: $log). Check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY)) and that Go is >= 1.24."
fi
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
