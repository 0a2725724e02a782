"""The descheduler's configuration API.

Loads a `descheduler/v1alpha2` DeschedulerConfiguration (Koordinator's
koord-descheduler) or DeschedulerPolicy (kubernetes-sigs/descheduler) YAML file
unchanged into one typed, fully defaulted `DeschedulerConfiguration`, and writes
it back (`dump_config`). Called by the CLI and the framework; plugins build their
Args from `fields`, `codecs`, `common` and `selectors`.

    registry = plugins.registry()                       # descheduler.plugins
    config = load_config(pathlib.Path("descheduler.yaml"), plugins=registry.catalog())
    config.profiles[0].args("LowNodeLoad")              # ConfigError lists every problem

The loader is always handed the plugin catalog; it never imports the plugins.
"""

from descheduler.config.catalog import ENTRY_POINT_GROUP, ExtensionPoint, PluginSpec
from descheduler.config.common import IncludeExclude, IntOrPercent, Namespaces, PriorityThreshold
from descheduler.config.fields import API_VERSION, PluginArgs
from descheduler.config.loader import (
    decode_configuration,
    default_configuration,
    dump_config,
    load_config,
)
from descheduler.config.model import (
    ClientConnection,
    ConfigKind,
    DeschedulerConfiguration,
    LeaderElection,
    MetricsProvider,
    MetricsSource,
    Profile,
)
from kube.configstruct import ConfigError, FieldError, FieldPath

__all__ = [
    "API_VERSION",
    "ENTRY_POINT_GROUP",
    "ClientConnection",
    "ConfigError",
    "ConfigKind",
    "DeschedulerConfiguration",
    "ExtensionPoint",
    "FieldError",
    "FieldPath",
    "IncludeExclude",
    "IntOrPercent",
    "LeaderElection",
    "MetricsProvider",
    "MetricsSource",
    "Namespaces",
    "PluginArgs",
    "PluginSpec",
    "PriorityThreshold",
    "Profile",
    "decode_configuration",
    "default_configuration",
    "dump_config",
    "load_config",
]
