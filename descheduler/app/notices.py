"""Things worth a warning in a configuration that loads and starts fine."""

from __future__ import annotations

from descheduler import config

MIGRATION_CONTROLLER = "MigrationController"


def config_warnings(cfg: config.DeschedulerConfiguration) -> list[str]:
    """One message per surprise, e.g. Koordinator's MigrationController args with nobody to read them."""
    found = []
    for profile in cfg.profiles:
        enabled = {name for names in profile.plugins.values() for name in names}
        if MIGRATION_CONTROLLER in profile.plugin_config and MIGRATION_CONTROLLER not in enabled:
            found.append(
                f"profile {profile.name}: the pluginConfig for {MIGRATION_CONTROLLER} is ignored; "
                f"{MIGRATION_CONTROLLER} is not implemented yet and not enabled, so DefaultEvictor "
                "filters and the eviction backend evicts"
            )
    return found
