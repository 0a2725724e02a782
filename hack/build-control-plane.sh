#!/usr/bin/env bash
# Builds the local control plane from the pinned modules in hack/go.mod —
# etcd, kube-apiserver, kube-scheduler, kube-controller-manager, and certgen
# (this repo's key-material generator) — in one `go build` invocation (the
# shared packages compile once) into a cache outside the repository, keyed by
# a digest of hack/, and prints the directory holding them. Idempotent: a second run prints the cached
# directory at once; concurrent runs wait for one build.
#
# Honours the envtest conventions: when KUBEBUILDER_ASSETS, or both
# TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD, name prebuilt binaries, those
# are used for those two; kube-scheduler, kube-controller-manager and certgen
# are still built from the pinned module.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "build-control-plane: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH. Install Go >= 1.26 (https://go.dev/doc/install); the control plane is built from source with it."

etcd_bin="" apiserver_bin=""
if [[ -n "${TEST_ASSET_KUBE_APISERVER:-}" || -n "${TEST_ASSET_ETCD:-}" ]]; then
  etcd_bin=${TEST_ASSET_ETCD:-} apiserver_bin=${TEST_ASSET_KUBE_APISERVER:-}
  [[ -x "$apiserver_bin" ]] || fail "TEST_ASSET_KUBE_APISERVER='$apiserver_bin' is not an executable file (set both TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD, or neither)"
  [[ -x "$etcd_bin" ]] || fail "TEST_ASSET_ETCD='$etcd_bin' is not an executable file (set both TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD, or neither)"
elif [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  etcd_bin="$KUBEBUILDER_ASSETS/etcd" apiserver_bin="$KUBEBUILDER_ASSETS/kube-apiserver"
  [[ -x "$apiserver_bin" && -x "$etcd_bin" ]] || fail "KUBEBUILDER_ASSETS='$KUBEBUILDER_ASSETS' must hold executable kube-apiserver and etcd"
fi

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cd "$here" && cat go.mod go.sum build-control-plane.sh cmd/*/main.go; go env GOVERSION GOOS GOARCH; echo "$etcd_bin $apiserver_bin") \
       | sha256sum | cut -c1-16)
out="$cache_root/control-plane/$key"
binaries=(certgen etcd kube-apiserver kube-scheduler kube-controller-manager)
ready() { local b; for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || return 1; done; }
if ready; then echo "$out"; exit 0; fi

mkdir -p "$cache_root/control-plane"
exec 9>"$cache_root/control-plane/.lock"
flock 9
if ready; then echo "$out"; exit 0; fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
log="$out.tmp/build.log"
# Stamp kube-apiserver with its real version (GET /version), as Kubernetes' own build does.
kver=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")
kminor=$(echo "$kver" | cut -d. -f2)
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$kver -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$kminor -X $vpkg.gitTreeState=clean"
if [[ -n "$etcd_bin" ]]; then
  ln -s "$etcd_bin" "$out.tmp/etcd"
  ln -s "$apiserver_bin" "$out.tmp/kube-apiserver"
  targets=(certgen kube-scheduler kube-controller-manager)
else
  targets=("${binaries[@]}")
fi
echo "building ${targets[*]} into $out (first run only; ~15 minutes on 2 cores)" >&2
pkgs=()
for t in "${targets[@]}"; do pkgs+=("./cmd/$t"); done
if ! (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$out.tmp/" "${pkgs[@]}") >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "go build ${pkgs[*]} failed (full log: $log). Check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY)) and that Go is >= 1.26."
fi
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
