#!/usr/bin/env bash
# Prepares this machine to run real Kubernetes nodes for the e2e suite
# (testbed/localnodes.py, `make e2e`) and prints the directory holding the kubelet.
#
#   1. checks what cannot be installed: root, a writable cgroup v1 hierarchy
#      (cpu, cpuacct, cpuset, memory, pids), overlayfs;
#   2. installs the Debian packages the nodes use when one is missing: the `nodes`
#      group of hack/host-packages.txt, by hack/host-setup.sh (idempotent);
#   3. builds the kubelet from the pinned k8s.io/kubernetes in hack/node/go.mod
#      (a module of its own, so the control-plane build and its cache key are
#      untouched) into a cache outside the repository, keyed by a digest of
#      hack/node; concurrent runs wait for one build. The Go build cache is
#      shared with the control-plane build, so most packages compile once.
#
# NODEQOS_NODE_NO_INSTALL=1 only checks, naming the missing packages.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "node-setup: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || fail "real nodes need root (containerd, runc, cgroup writes, network namespaces); run as root"
for sub in cpu cpuacct cpuset memory pids; do
  dir=/sys/fs/cgroup/$sub
  [[ -d $dir && -w $dir/cgroup.procs ]] \
    || fail "no writable cgroup v1 '$sub' hierarchy at $dir: the nodes use the kubelet's cgroupfs driver on cgroup v1 (mount it, e.g. mount -t cgroup -o $sub cgroup $dir)"
done
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null \
  || fail "the kernel has no overlayfs (containerd's snapshotter); load it with modprobe overlay"

# The `nodes` packages of the one host list (hack/host-packages.txt).
[[ -z "${NODEQOS_NODE_NO_INSTALL:-}" ]] || export NODEQOS_HOST_NO_INSTALL=1
"$here/host-setup.sh" nodes || fail "the real nodes' host packages are missing (above)"
# busybox-static replaces a dynamic busybox at the same path; the images need the static one.
file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' \
  || ldd /bin/busybox 2>&1 | grep -q 'not a dynamic executable' \
  || fail "/bin/busybox is not statically linked; install busybox-static"

command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH. Install Go >= 1.26; the kubelet is built from source with it."
cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cd "$here/node" && cat go.mod go.sum cmd/*/main.go; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-16)
out="$cache_root/node/$key"
if [[ -x "$out/kubelet" ]]; then echo "$out"; exit 0; fi

mkdir -p "$cache_root/node"
exec 9>"$cache_root/node/.lock"
flock 9
if [[ -x "$out/kubelet" ]]; then echo "$out"; exit 0; fi
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
log="$out.tmp/build.log"
kver=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/node/go.mod")
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$kver -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$(echo "$kver" | cut -d. -f2) -X $vpkg.gitTreeState=clean"
echo "building the kubelet into $out (first run only; ~1 minute after the control-plane build, ~10 cold)" >&2
if ! (cd "$here/node" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$out.tmp/" ./cmd/kubelet) >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "go build ./cmd/kubelet failed (full log: $log); check that the Go module proxy is reachable"
fi
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
