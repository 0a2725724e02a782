#!/usr/bin/env bash
# Builds the Kubernetes binaries of an older supported minor, on demand, and
# prints the directory holding them:
#
#   hack/build-minor.sh 1.34 [kube-apiserver] [kube-scheduler] [kube-controller-manager] [kubelet]
#
# (no binary named: the three control-plane ones). The newest minor is the one
# pinned in hack/go.mod and hack/node/go.mod (hack/build-control-plane.sh and
# hack/node-setup.sh build it); each older one has its own pins in
# hack/minor/v<minor>/go.mod, and the same main packages (hack/cmd/*,
# hack/node/cmd/kubelet) are compiled against them. Each binary is built the
# first time a run asks for it, into a cache outside the repository keyed by a
# digest of those inputs; etcd and certgen do not depend on the minor and are
# linked from the control-plane build. Concurrent runs wait for one build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "build-minor: $*" >&2; exit 1; }

minors=$(cd "$here/minor" && ls -d v1.* | sed 's/^v//' | tr '\n' ' ')
pinned=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/go.mod" | sed 's/^v//' | cut -d. -f1,2)
[[ $# -ge 1 ]] || fail "usage: build-minor.sh MINOR [BINARY...]; minors: ${minors}(and $pinned, the pinned one)"
minor=${1#v}; shift
[[ "$minor" != "$pinned" ]] || fail "$minor is the pinned minor: hack/build-control-plane.sh and hack/node-setup.sh build it"
mod="$here/minor/v$minor"
[[ -f "$mod/go.mod" ]] || fail "no pins for Kubernetes $minor (hack/minor/v$minor/go.mod); minors: ${minors}(and $pinned)"
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=(kube-apiserver kube-scheduler kube-controller-manager)
for b in "${wanted[@]}"; do
  case $b in
    kube-apiserver|kube-scheduler|kube-controller-manager) src="$here/cmd/$b/main.go" ;;
    kubelet) src="$here/node/cmd/kubelet/main.go" ;;
    *) fail "unknown binary '$b': name kube-apiserver, kube-scheduler, kube-controller-manager or kubelet" ;;
  esac
done
command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH. Install Go >= 1.26; Kubernetes is built from source with it."

# etcd and certgen: from the pinned control-plane build (built there if needed).
plane=$("$here/build-control-plane.sh")

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cat "$mod/go.mod" "$mod/go.sum" "$here/build-minor.sh" "$here"/cmd/kube-*/main.go "$here/node/cmd/kubelet/main.go"
        go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-16)
out="$cache_root/minor/v$minor-$key"
ready() { local b; for b in "${wanted[@]}"; do [[ -x "$out/$b" ]] || return 1; done; [[ -x "$out/etcd" ]]; }
if ready; then echo "$out"; exit 0; fi

mkdir -p "$cache_root/minor"
exec 9>"$cache_root/minor/.lock"
flock 9
if ready; then echo "$out"; exit 0; fi
mkdir -p "$out"
ln -sfn "$plane/etcd" "$out/etcd"
ln -sfn "$plane/certgen" "$out/certgen"

# A module tree of its own: the minor's pins beside copies of the main packages.
work="$out/.src"
rm -rf "$work"
mkdir -p "$work"
cp "$mod/go.mod" "$mod/go.sum" "$work/"
kver=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$mod/go.mod")
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$kver -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$(echo "$kver" | cut -d. -f2) -X $vpkg.gitTreeState=clean"
todo=()
for b in "${wanted[@]}"; do
  [[ -x "$out/$b" ]] && continue
  todo+=("./cmd/$b")
  mkdir -p "$work/cmd/$b"
  if [[ $b == kubelet ]]; then cp "$here/node/cmd/kubelet/main.go" "$work/cmd/$b/"; else cp "$here/cmd/$b/main.go" "$work/cmd/$b/"; fi
done
log="$out/build.log"
echo "building Kubernetes $kver ${todo[*]#./cmd/} into $out (first run only; ~5-8 minutes a binary on 2 cores)" >&2
if ! (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$out/.tmp/" "${todo[@]}") >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "go build of Kubernetes $kver ${todo[*]} failed (full log: $log); check that the Go module proxy is reachable"
fi
mv "$out/.tmp/"* "$out/"
rm -rf "$out/.tmp" "$work"
echo "$out"
