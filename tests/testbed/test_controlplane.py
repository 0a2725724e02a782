"""The local control plane is real: version, RBAC, service-account tokens, teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kube import rest
from testbed import controlplane

pytestmark = pytest.mark.controlplane


def test_version_is_the_pinned_release(kube: rest.Rest) -> None:
    """GET /version reports the Kubernetes release pinned in hack/go.mod."""
    pinned = next(
        line.split()[1]
        for line in (controlplane.BUILD_SCRIPT.parent / "go.mod").read_text().splitlines()
        if line.strip().startswith("k8s.io/kubernetes ")
    )
    assert kube.get("/version")["gitVersion"] == pinned


def test_service_account_without_rights_gets_403(control_plane: controlplane.ControlPlane) -> None:
    """RBAC is enforced: a fresh ServiceAccount may not list Secrets."""
    identity = control_plane.service_account("default", "no-rights")
    client = rest.Rest.from_kubeconfig(identity.kubeconfig, qps=0)
    with pytest.raises(rest.ApiError) as caught:
        client.get("/api/v1/namespaces/default/secrets")
    assert caught.value.status == 403
    assert "no-rights" in caught.value.message


def test_granted_role_allows_exactly_that(
    control_plane: controlplane.ControlPlane, kube: rest.Rest
) -> None:
    """A Role bound to the ServiceAccount grants what it says and nothing more."""
    identity = control_plane.service_account("default", "pod-reader")
    kube.create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
    )
    kube.create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        {
            "metadata": {"name": "pod-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "pod-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "pod-reader", "namespace": "default"}],
        },
    )
    client = rest.Rest.from_kubeconfig(identity.kubeconfig, qps=0)
    assert client.get("/api/v1/namespaces/default/pods")["kind"] == "PodList"
    with pytest.raises(rest.ApiError) as caught:
        client.get("/api/v1/namespaces/default/configmaps")
    assert caught.value.status == 403


def test_missing_binaries_fail_with_instructions(tmp_path: object) -> None:
    """An empty binary dir names what is missing and how to build it."""
    with pytest.raises(controlplane.ControlPlaneError) as caught:
        controlplane.Binaries.in_dir(controlplane.Path(str(tmp_path)))
    assert "make control-plane" in str(caught.value)
    assert "KUBEBUILDER_ASSETS" in str(caught.value)


def test_sigterm_leaves_no_process_behind(control_plane: controlplane.ControlPlane) -> None:
    """A process holding a control plane that gets SIGTERM or SIGKILL takes etcd and the API server with it."""
    script = textwrap.dedent("""
        import signal, sys, time
        from pathlib import Path
        from testbed import controlplane
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with controlplane.ControlPlane(crds_dir=None) as plane:
            print(plane.workdir, flush=True)
            time.sleep(120)
    """)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        child = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
        )
        assert child.stdout is not None
        workdir = child.stdout.readline().strip()
        assert workdir, "the child did not start a control plane"
        child.send_signal(sig)
        child.wait(30)
        child.stdout.close()
        deadline = time.monotonic() + 15
        while _processes_using(workdir) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _processes_using(workdir) == [], f"left behind after {sig!r}"


def _processes_using(workdir: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if workdir.encode() in cmdline:
            found.append(int(entry))
    return found
