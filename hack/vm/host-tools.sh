#!/usr/bin/env bash
# What this host needs to build and boot the cgroup v2 node VM (hack/vm/build-image.sh,
# testbed/vm.py): the `vm` group of hack/host-packages.txt (QEMU, debootstrap,
# e2fsprogs), installed by hack/host-setup.sh. NODEQOS_VM_NO_INSTALL=1 only checks.
here=${BASH_SOURCE[0]%/*}
[[ -z "${NODEQOS_VM_NO_INSTALL:-}" ]] || export NODEQOS_HOST_NO_INSTALL=1
# $BASH, not a PATH lookup: tests run this with a PATH that hides the tools.
exec "$BASH" "$here/../host-setup.sh" vm
