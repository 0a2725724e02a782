"""ClusterColocationProfiles on the oldest minor's real API server, which serves no
MutatingAdmissionPolicy: the manager's webhook path, with the suite's own profile tests
(tests/manager/test_profilepaths_controlplane.py) run unchanged against it. There they
run through both paths on a 1.37 server with the policy turned off; here the server is
the oldest supported release as it ships, and `auto` (the default) must find the webhook
on its own."""

from __future__ import annotations

import pytest

from kube import rest
from manager import profilecontroller
from tests.manager.test_profilepaths_controlplane import (  # noqa: F401 - run on the oldest minor
    cleanup,
    test_a_mid_profile_rewrites_to_mid_on_both_paths,
    test_a_profile_neither_path_can_express_is_refused_the_same_way,
    test_every_field_comes_out_the_same_on_both_paths,
    test_the_manager_daemon_picks_the_webhook_where_the_policies_are_not_served,
    test_the_webhook_path_draws_the_probability_in_process,
    test_webhook_down_pods_are_created_unmutated,
)

pytestmark = pytest.mark.controlplane


@pytest.fixture(scope="module")
def map_off(kube: rest.Rest) -> rest.Rest:
    """The oldest minor as it ships serves no MutatingAdmissionPolicy: nothing to turn off."""
    return kube


@pytest.fixture(params=["webhook"])
def path_and_kube(kube: rest.Rest) -> tuple[str, rest.Rest]:
    """Only the webhook path can apply a profile here."""
    return "webhook", kube


def test_discovery_finds_no_policies_on_the_oldest_minor(kube: rest.Rest) -> None:
    assert profilecontroller.serves_policies(kube) is False
