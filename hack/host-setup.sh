#!/usr/bin/env bash
# Installs the host packages nodeqos's setup needs, from the one list in
# hack/host-packages.txt, with apt-get: the packages of the groups named on the
# command line (nodes, vm, load, bench), or of every group when none is named.
#
# Idempotent: nothing happens (no apt-get call) when every package's commands and
# files are there, which takes a few milliseconds. `make test`, `make demo`,
# `make e2e*` and `make bench` run it first (hack/with-env.sh), so no test finds
# a host tool missing because another test that would have installed it has not
# run yet.
#
#   NODEQOS_HOST_NO_INSTALL=1  only checks: fails naming the missing packages and
#                              the apt-get command that installs them
#   --warn                     where nothing can be installed (not root, no apt-get),
#                              names what is missing and exits 0: the tests that need
#                              those tools then fail saying to run this script as root
#
# Only bash builtins until something is missing: tests run it with a PATH that
# hides the tools (tests/test_host_packages.py, tests/cgroupv2vm/test_host_tools.py).
set -euo pipefail

here=${BASH_SOURCE[0]%/*}
[[ $here == "${BASH_SOURCE[0]}" ]] && here=.
list=$(cd "$here" && pwd)/host-packages.txt
warn_only=
groups=()
for arg in "$@"; do
  case $arg in
    --warn) warn_only=1 ;;
    -*) echo "host-setup: unknown option $arg (usage: host-setup.sh [--warn] [GROUP...])" >&2; exit 2 ;;
    *) groups+=("$arg") ;;
  esac
done

fail() { echo "host-setup: $*" >&2; exit 1; }

present() {  # a command on PATH (plus the sbin directories), or an absolute path
  if [[ $1 == /* ]]; then [[ -e $1 ]]; else PATH="$PATH:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1; fi
}

known_groups=" "
missing=()
while read -r pkg provides pkg_groups _; do
  [[ -z $pkg || $pkg == \#* ]] && continue
  for group in ${pkg_groups//,/ }; do
    [[ $known_groups == *" $group "* ]] || known_groups+="$group "
  done
  wanted=${#groups[@]}
  for group in "${groups[@]}"; do
    [[ ",$pkg_groups," == *",$group,"* ]] && wanted=0
  done
  ((wanted == 0)) || continue
  IFS=, read -r -a items <<<"$provides"
  for item in "${items[@]}"; do
    present "$item" || { missing+=("$pkg"); break; }
  done
done <"$list"
for group in "${groups[@]}"; do
  [[ $known_groups == *" $group "* ]] \
    || { echo "host-setup: unknown group '$group' (the groups of $list:$known_groups)" >&2; exit 2; }
done
((${#missing[@]} == 0)) && exit 0

wanted="missing Debian packages ${missing[*]} (apt-get install ${missing[*]})"
cannot() {
  if [[ -n $warn_only ]]; then
    echo "host-setup: $wanted; $1. Tests that need them will fail until hack/host-setup.sh runs as root." >&2
    exit 0
  fi
  fail "$wanted; $1"
}
[[ -z "${NODEQOS_HOST_NO_INSTALL:-}" ]] || fail "$wanted"
((EUID == 0)) || cannot "installing them needs root"
command -v apt-get >/dev/null 2>&1 || cannot "no apt-get on this host to install them"

echo "host-setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt-get may hold dpkg's lock: wait for it, within bounds.
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
