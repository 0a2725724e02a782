#!/usr/bin/env bash
# Builds the cgroup v2 node VM (testbed/vm.py, `make e2e-cgroupv2`) and prints the
# directory holding it:
#
#   rootfs.img   an ext4 filesystem image (raw, sparse) of a Debian bookworm made by
#                debootstrap: systemd as PID 1, cgroup v2 only, containerd + runc +
#                CNI plugins from Debian (containerd's runc runtime with
#                SystemdCgroup = true, CNI binaries from /usr/lib/cni), python3, and
#                hack/vm/guest-agent.py serving commands on a virtio-serial port;
#   vmlinuz, initrd.img
#                Debian's linux-image-cloud-amd64 kernel and the initramfs
#                initramfs-tools made for it inside the root filesystem;
#   cmdline      the kernel command line testbed/vm.py boots with;
#   build-seconds  how long the build took (wall).
#
# Cached under $NODEQOS_CACHE/vm/<key>, the key a digest of this script, the guest
# agent, the suite and the mirror: a second run prints the directory at once; a
# concurrent run waits for the first (flock), as hack/node-setup.sh does. The
# image is booted with QEMU's -snapshot, so it stays as built. NODEQOS_VM_NO_BUILD=1
# only looks: it fails, saying how to build, when the image is not cached.
# Needs root (debootstrap, chroot) and debootstrap (apt-get install debootstrap).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "vm-image: $*" >&2; exit 1; }

suite=bookworm mirror=${NODEQOS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=systemd,systemd-sysv,udev,dbus,kmod,iproute2,procps,util-linux,e2fsprogs,python3,containerd,runc,containernetworking-plugins,linux-image-cloud-amd64,initramfs-tools,ca-certificates,iptables
cmdline="console=ttyS0 root=/dev/vda rw rootfstype=ext4 systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all panic=-1 quiet loglevel=4 systemd.show_status=1 net.ifnames=0"

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cat "$here/build-image.sh" "$here/guest-agent.py"; echo "$suite $mirror") | sha256sum | cut -c1-16)
out="$cache_root/vm/$key"
ready() { [[ -f "$out/rootfs.img" && -f "$out/vmlinuz" && -f "$out/initrd.img" && -f "$out/cmdline" ]]; }
if ready; then echo "$out"; exit 0; fi
[[ -z "${NODEQOS_VM_NO_BUILD:-}" ]] \
  || fail "the cgroup v2 VM image is not built (no $out); make e2e-cgroupv2 builds it (hack/vm/build-image.sh, a few minutes, needs root and debootstrap)"

[[ $(id -u) -eq 0 ]] || fail "building the VM image needs root (debootstrap, chroot); run as root"
command -v debootstrap >/dev/null 2>&1 || fail "no debootstrap on PATH (apt-get install debootstrap)"
command -v mkfs.ext4 >/dev/null 2>&1 || fail "no mkfs.ext4 on PATH (apt-get install e2fsprogs)"

mkdir -p "$cache_root/vm"
exec 9>"$cache_root/vm/.lock"
flock 9
if ready; then echo "$out"; exit 0; fi

started=$(date +%s)
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
log="$out.tmp/build.log"
rootfs="$out.tmp/rootfs"
# debootstrap mounts /proc (and /sys) in the target and, when interrupted, can leave
# them mounted: never copy or delete through a mount.
unmount_below() {
  findmnt -rn -o TARGET | grep -F "$rootfs/" | sort -r | while read -r m; do umount -l "$m"; done || true
}
trap unmount_below EXIT
echo "vm-image: debootstrap $suite into $rootfs (first run only; a few minutes)" >&2
# The kernel's postinst builds the initramfs inside the chroot; no host kernel is touched.
if ! debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "debootstrap $suite $mirror failed (log: $log); check that the Debian mirror is reachable"
fi
unmount_below

# --- the guest's configuration -------------------------------------------------
echo nodeqos-vm >"$rootfs/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 nodeqos-vm\n' >"$rootfs/etc/hosts"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$rootfs/etc/fstab"
chroot "$rootfs" passwd -d root >/dev/null   # console login for debugging only; no network service listens
# eth0 by DHCP from QEMU's user network (10.0.2.15, gateway 10.0.2.2 = host loopback).
mkdir -p "$rootfs/etc/systemd/network"
printf '[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n' >"$rootfs/etc/systemd/network/eth0.network"
chroot "$rootfs" systemctl enable systemd-networkd.service >>"$log" 2>&1

install -m 0755 "$here/guest-agent.py" "$rootfs/usr/local/sbin/nodeqos-guest-agent"
cat >"$rootfs/etc/systemd/system/nodeqos-guest-agent.service" <<'EOF'
[Unit]
Description=nodeqos test VM command agent (virtio-serial org.nodeqos.agent)
# Early (not after multi-user): the tests only need systemd and the cgroup tree. The port
# appears when udev has run; until then the agent fails to open it and is restarted.
DefaultDependencies=no
After=systemd-udevd.service systemd-remount-fs.service
Conflicts=shutdown.target
Before=shutdown.target
StartLimitIntervalSec=0

[Service]
ExecStart=/usr/local/sbin/nodeqos-guest-agent
Restart=always
RestartSec=0.5

[Install]
WantedBy=multi-user.target
EOF
chroot "$rootfs" systemctl enable nodeqos-guest-agent.service >>"$log" 2>&1

# containerd: the kubelet's systemd cgroup driver needs runc's systemd driver too.
mkdir -p "$rootfs/etc/containerd"
chroot "$rootfs" containerd config default >"$rootfs/etc/containerd/config.toml"
sed -i -e 's/SystemdCgroup = false/SystemdCgroup = true/' \
       -e 's#bin_dir = "/opt/cni/bin"#bin_dir = "/usr/lib/cni"#' "$rootfs/etc/containerd/config.toml"
grep -q 'SystemdCgroup = true' "$rootfs/etc/containerd/config.toml" \
  || fail "containerd's default config has no SystemdCgroup switch to turn on (log: $log)"
# Started on demand (the kubelet step): under TCG every service costs boot seconds.
chroot "$rootfs" systemctl disable containerd.service >>"$log" 2>&1 || true
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer; do
  chroot "$rootfs" systemctl disable "$unit" >>"$log" 2>&1 || true
done
mkdir -p "$rootfs/mnt/host"

kernel=$(ls "$rootfs"/boot/vmlinuz-* | sort -V | tail -n 1)
initrd=$(ls "$rootfs"/boot/initrd.img-* | sort -V | tail -n 1)
[[ -f $kernel && -f $initrd ]] || fail "no kernel or initramfs in $rootfs/boot (log: $log)"
cp "$kernel" "$out.tmp/vmlinuz"
cp "$initrd" "$out.tmp/initrd.img"
basename "$kernel" | sed 's/^vmlinuz-//' >"$out.tmp/kernel-version"
rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"*

# --- the disk ------------------------------------------------------------------
# mkfs.ext4 -d copies the tree in: no loop device, no mount.
used=$(du -sm "$rootfs" | cut -f1)
truncate -s "$((used + 3072))M" "$out.tmp/rootfs.img"
if ! mkfs.ext4 -q -F -L nodeqos-vm -d "$rootfs" "$out.tmp/rootfs.img" >>"$log" 2>&1; then
  tail -n 20 "$log" >&2
  fail "mkfs.ext4 -d failed (log: $log)"
fi
unmount_below
rm -rf "$rootfs"
echo "$cmdline" >"$out.tmp/cmdline"
echo "$(($(date +%s) - started))" >"$out.tmp/build-seconds"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "vm-image: built in $(cat "$out/build-seconds") s" >&2
echo "$out"
