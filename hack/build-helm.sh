#!/usr/bin/env bash
# Builds the helm CLI from the pinned helm.sh/helm/v3 module in hack/helm/ into
# a cache outside the repository keyed by a digest of hack/helm/ and this
# script, and prints the directory holding it. The chart tests (tests/deploy)
# and the Helm install on the real nodes (tests/e2e) call it, so a fresh
# machine builds helm on first use. Separate from the control plane's build
# (hack/build-control-plane.sh): its own module, its own cache directory.
# Idempotent; concurrent runs wait for one build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "build-helm: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH. Install Go >= 1.26 (https://go.dev/doc/install); helm is built from source with it."

cache_root=${NODEQOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeqos}
key=$( (cd "$here" && cat helm/go.mod helm/go.sum build-helm.sh; go env GOVERSION GOOS GOARCH) \
       | sha256sum | cut -c1-16)
out="$cache_root/helm/$key"
if [[ -x "$out/helm" ]]; then echo "$out"; exit 0; fi

mkdir -p "$cache_root/helm"
exec 9>"$cache_root/helm/.lock"
flock 9
if [[ -x "$out/helm" ]]; then echo "$out"; exit 0; fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
log="$out.tmp/build.log"
# Stamped as helm's own Makefile does: the release version (`helm version`),
# and the Kubernetes version of its client-go (major + 1, minor) as the
# default .Capabilities.KubeVersion of `helm template` and `helm lint`;
# unstamped, both would claim Kubernetes 1.20.
hver=$(awk '$1 == "helm.sh/helm/v3" {print $2; exit}' "$here/helm/go.mod")
cgo=$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$here/helm/go.mod")
kmajor=$(( $(echo "${cgo#v}" | cut -d. -f1) + 1 ))
kminor=$(echo "$cgo" | cut -d. -f2)
[[ -n "$hver" && -n "$cgo" ]] || fail "hack/helm/go.mod must require helm.sh/helm/v3 and k8s.io/client-go"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$hver -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=$kmajor -X $pkg.k8sVersionMinor=$kminor"
done
echo "building helm $hver into $out (first run only; a few minutes on 2 cores)" >&2
if ! (cd "$here/helm" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" \
        -o "$out.tmp/helm" helm.sh/helm/v3/cmd/helm) >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "go build helm.sh/helm/v3/cmd/helm failed (full log: $log). Check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY)) and that Go is >= 1.26."
fi
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
