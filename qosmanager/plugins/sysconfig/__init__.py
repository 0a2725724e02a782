"""SystemConfig: min_free_kbytes and watermark_scale_factor within safe bounds."""

from qosmanager import features
from qosmanager.plugins.sysconfig.plugin import NAME, Setting, SystemConfig, settings

# The QoS plugin surface (qosmanager.discovery): gate name, gate spec, factory.
FEATURE = features.builtin_spec(NAME)
factory = SystemConfig  # unbound; the agent binds its Handle after parsing the flags

__all__ = ["FEATURE", "NAME", "Setting", "SystemConfig", "factory", "settings"]
