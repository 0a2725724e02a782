#!/usr/bin/env bash
# Builds the nodeqos image from the repository's Dockerfile without any registry
# and prints the path of an OCI archive of it (image nodeqos.local/nodeqos:dev),
# ready for `ctr -n k8s.io images import` on the e2e suite's nodes.
#
#   1. a Debian bookworm base made by debootstrap (minbase + python3, python3-venv,
#      ca-certificates), trusting the certificate authorities this host adds in
#      /usr/local/share/ca-certificates (a TLS-inspecting proxy's, for instance:
#      pip inside the build must reach PyPI the way the host does), imported
#      into buildah as nodeqos.local/debian:bookworm; cached, ~80 s cold;
#   2. `buildah bud --build-arg BASE_IMAGE=nodeqos.local/debian:bookworm` of the
#      Dockerfile (chroot isolation, vfs storage: no daemon, no overlay-on-overlay);
#      cached by a digest of the Dockerfile and the sources it copies.
#
# Everything lives under $NODEQOS_CACHE/node-image; needs root, debootstrap and
# buildah (hack/host-setup.sh installs them).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fail() { echo "node-image: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || fail "building the image needs root (debootstrap, buildah); run as root"
for tool in debootstrap buildah; do
  command -v $tool >/dev/null 2>&1 || fail "no $tool on PATH; run hack/host-setup.sh as root (apt-get install $tool)"
done

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}/node-image
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
buildah=(buildah --root "$cache_root/storage" --runroot "$cache_root/run" --storage-driver vfs)
base=nodeqos.local/debian:bookworm
suite=bookworm mirror=${NODEQOS_DEBIAN_MIRROR:-http://deb.debian.org/debian}

extra_cas=(/usr/local/share/ca-certificates/*.crt)
[[ -e ${extra_cas[0]} ]] || extra_cas=()
base_key=$( (echo "$suite $mirror python3 python3-venv ca-certificates"; cat "${extra_cas[@]}" /dev/null) | sha256sum | cut -c1-16)
if [[ "$(cat "$cache_root/base.key" 2>/dev/null)" != "$base_key" ]] \
    || ! "${buildah[@]}" inspect --type image "$base" >/dev/null 2>&1; then
  rootfs="$cache_root/rootfs.tmp"
  rm -rf "$rootfs"
  echo "node-image: debootstrap $suite into $rootfs (first run only)" >&2
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      "$suite" "$rootfs" "$mirror" >"$cache_root/debootstrap.log" 2>&1 \
    || { tail -n 20 "$cache_root/debootstrap.log" >&2; fail "debootstrap $suite $mirror failed (log: $cache_root/debootstrap.log)"; }
  if [[ ${#extra_cas[@]} -gt 0 ]]; then
    cp "${extra_cas[@]}" "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
  fi
  # pip in a virtual environment trusts its own bundle unless told otherwise.
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$rootfs/etc/pip.conf"
  rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"*
  "${buildah[@]}" rmi -f "$base" >/dev/null 2>&1 || true
  ctr=$("${buildah[@]}" from scratch)
  mnt=$("${buildah[@]}" mount "$ctr")
  cp -a "$rootfs/." "$mnt/"
  "${buildah[@]}" umount "$ctr" >/dev/null
  "${buildah[@]}" commit -q "$ctr" "$base" >/dev/null
  "${buildah[@]}" rm "$ctr" >/dev/null
  rm -rf "$rootfs"
  echo "$base_key" >"$cache_root/base.key"
fi

# The packages the Dockerfile copies, read from it, so a package added there is keyed too.
packages=$(awk '$1 == "COPY" && $2 !~ /^--/ && $2 == $3 { print $2 }' "$repo/Dockerfile")
[[ -n $packages ]] || fail "no 'COPY <package> <package>' line in $repo/Dockerfile"
# shellcheck disable=SC2086  # one word per package
key=$( (cd "$repo" && echo "$base_key" && cat Dockerfile pyproject.toml README.md \
        && find $packages \( -name '*.py' -o -name py.typed \) -print | sort | xargs cat) \
       | sha256sum | cut -c1-16)
archive="$cache_root/nodeqos-$key.tar"
if [[ -f $archive ]]; then echo "$archive"; exit 0; fi
echo "node-image: buildah bud $repo/Dockerfile on $base" >&2
if ! "${buildah[@]}" bud --isolation chroot --layers=false --build-arg BASE_IMAGE="$base" \
      -t nodeqos.local/nodeqos:dev "$repo" >"$cache_root/bud.log" 2>&1; then
  tail -n 20 "$cache_root/bud.log" >&2
  fail "buildah bud failed (log: $cache_root/bud.log)"
fi
"${buildah[@]}" push -q nodeqos.local/nodeqos:dev "oci-archive:$archive.tmp:nodeqos.local/nodeqos:dev" >&2
mv "$archive.tmp" "$archive"
# Keep the newest three archives (this one among them): checkouts of different
# commits share this cache and would otherwise rebuild each other's image.
find "$cache_root" -maxdepth 1 -name 'nodeqos-*.tar' -printf '%T@ %p\n' | sort -rn \
  | tail -n +4 | cut -d' ' -f2- | xargs -r rm -f
echo "$archive"
