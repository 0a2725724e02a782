"""SystemConfig: min_free_kbytes and watermark_scale_factor within safe bounds."""

from qosmanager.plugins.sysconfig.plugin import NAME, Setting, SystemConfig, settings

__all__ = ["NAME", "Setting", "SystemConfig", "settings"]
