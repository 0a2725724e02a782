"""What differs on the oldest supported minor, run on its real kube-apiserver.

The tests imported here are the suite's own, unchanged: this directory's
conftest gives them the oldest minor's control plane instead of the pinned
newest one. They cover what nodeqos asks of the API server itself (the real-node
parts run on each minor in `make e2e-matrix`): the deploy/ manifests and the
chart, the agent's ValidatingAdmissionPolicies (v1 since 1.30), the Eviction
API with PDBs enforced by the server, and the descheduler's evictor over it. The
tests written here pin what 1.34 serves and does not, so a change to either
side is seen.
"""

from __future__ import annotations

import logging

import pytest

from kube import rest, serverversion
from testbed import controlplane
from tests.deploy.test_agent_policies import (  # noqa: F401 - run here on the oldest minor
    nodes,
    test_a_token_bound_to_no_node_writes_no_nodemetric,
    test_the_agent_of_a_node_writes_only_that_nodes_nodemetric,
)
from tests.deploy.test_chart import (  # noqa: F401
    test_every_value_renders_objects_the_api_server_accepts,
    test_install_dry_run_warns_while_the_image_is_the_placeholder,
)
from tests.deploy.test_manifests import (  # noqa: F401
    applied,
    test_every_manifest_passes_server_side_dry_run,
)
from tests.descheduler.test_evictor_controlplane import (  # noqa: F401
    cluster,
    descheduler,
    test_d4_pdb_blocked_is_reported_and_the_next_candidate_goes,
)
from tests.kube.test_eviction import (  # noqa: F401
    test_outcomes_are_classified,
    test_pdb_blocks_with_429_and_allows_when_budget_left,
)
from tests.minor.conftest import OLDEST

pytestmark = pytest.mark.controlplane


def test_the_oldest_minor_is_the_oldest_the_daemons_accept() -> None:
    """One range: the minors hack/ builds are exactly kube.serverversion's OLDEST..NEWEST."""
    minors = controlplane.supported_minors()
    oldest, newest = serverversion.OLDEST, serverversion.NEWEST
    assert minors == [f"1.{m}" for m in range(oldest.minor, newest.minor + 1)]
    assert controlplane.pinned_minor() == str(newest)


def test_the_server_runs_the_oldest_minor_and_every_daemon_accepts_it(
    kube: rest.Rest, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="kube.serverversion"):
        found = serverversion.check(kube, "nodeqos-test")
    assert found is not None
    assert str(found.minor) == OLDEST == str(serverversion.OLDEST)
    assert f"the API server runs Kubernetes {found.git_version} (supported: " in caplog.text


def _served(kube: rest.Rest, group_version: str) -> set[str]:
    try:
        listing = kube.get(f"/apis/{group_version}")
    except rest.ApiError as err:
        if err.not_found:
            return set()
        raise
    return {r["name"] for r in listing["resources"]}


def test_what_the_oldest_minor_serves_and_does_not(kube: rest.Rest) -> None:
    """ValidatingAdmissionPolicy v1 (the agent's policies) is served; MutatingAdmissionPolicy
    is not, in any version, unless the cluster's admin turns on its beta: the
    ClusterColocationProfiles' reason for a webhook path (docs/compatibility.md)."""
    admission = _served(kube, "admissionregistration.k8s.io/v1")
    assert {"validatingadmissionpolicies", "validatingadmissionpolicybindings"} <= admission
    assert "mutatingadmissionpolicies" not in admission
    assert "mutatingadmissionpolicies" not in _served(kube, "admissionregistration.k8s.io/v1beta1")
    assert _served(kube, "admissionregistration.k8s.io/v1alpha1") == set()
    assert {"leases"} <= _served(kube, "coordination.k8s.io/v1")
    assert "poddisruptionbudgets" in _served(kube, "policy/v1")
    assert "pods/eviction" in {r["name"] for r in kube.get("/api/v1")["resources"]}
