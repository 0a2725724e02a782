#!/usr/bin/env bash
# Installs what this host needs to build and boot the cgroup v2 node VM
# (hack/vm/build-image.sh, testbed/vm.py) when one piece is missing, with apt-get:
#
#   qemu-system-x86   QEMU (KVM where it works, TCG otherwise)
#   debootstrap       the guest's root filesystem
#   e2fsprogs         mkfs.ext4 -d, which writes it into the disk image
#
# Idempotent: nothing happens (no apt-get call) when all are there. Fails, naming
# the missing packages and what stops their install, when we are not root, there is
# no apt-get, or apt-get cannot install them (the mirror unreachable, say).
# NODEQOS_VM_NO_INSTALL=1 only checks. `make test` runs it through the cgroupv2vm
# tests, which skip with its message; `make e2e-cgroupv2` fails with it.
set -euo pipefail

fail() { echo "vm-host-tools: $*" >&2; exit 1; }

declare -A provides=(
  [qemu-system-x86]=qemu-system-x86_64 [debootstrap]=debootstrap [e2fsprogs]=mkfs.ext4
)
missing=()
for pkg in qemu-system-x86 debootstrap e2fsprogs; do
  # sbin is not on every PATH (a non-login root shell, say).
  PATH="$PATH:/usr/sbin:/sbin" command -v "${provides[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

wanted="missing Debian packages ${missing[*]} (apt-get install ${missing[*]})"
[[ -z "${NODEQOS_VM_NO_INSTALL:-}" ]] || fail "$wanted"
[[ $(id -u) -eq 0 ]] || fail "$wanted; installing them needs root"
command -v apt-get >/dev/null 2>&1 || fail "$wanted; no apt-get on this host to install them"
echo "vm-host-tools: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt-get (a colleague's node-setup.sh) may hold dpkg's lock: wait for it.
apt_get=(apt-get -o DPkg::Lock::Timeout=600 -y --no-install-recommends)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${apt_get[@]}" install "${missing[@]}" >"$log" 2>&1; then
  # A fresh machine has no package lists yet.
  if ! { apt-get -o DPkg::Lock::Timeout=600 update && "${apt_get[@]}" install "${missing[@]}"; } >>"$log" 2>&1; then
    tail -n 15 "$log" >&2
    fail "$wanted; apt-get could not install them (is the Debian mirror reachable?)"
  fi
fi
