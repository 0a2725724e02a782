"""BatchResource: Batch pods' cgroups (shares, CFS quota, memory limit) from batch-cpu/memory."""

from qosmanager import features
from qosmanager.plugins.batchresource import rules
from qosmanager.plugins.batchresource.plugin import NAME, BatchResource, targets

# The QoS plugin surface (qosmanager.discovery): gate name, gate spec, factory.
FEATURE = features.builtin_spec(NAME)
factory = BatchResource  # unbound; the agent binds its Handle after parsing the flags

__all__ = ["FEATURE", "NAME", "BatchResource", "factory", "rules", "targets"]
