"""The node QoS framework: extension plugins, resource executor, evictor, strategies.

The agent composes it like this (names are this package's public surface):

    metrics = qosmanager.QoSMetrics(prometheus_registry)
    executor = qosmanager.ResourceExecutor(fs, metrics=metrics, sysctl_root=Path("/host/proc/sys"))
    api = qosmanager.KubeEvictionAPI(client, events.Recorder(client, "nodeqos-agent", node))
    evictor = qosmanager.Evictor(api, metrics=metrics)
    handle = qosmanager.Handle(fs=fs, executor=executor, evictor=evictor, metrics=metrics)
    registry = qosmanager.plugin_registry()        # built-ins + installed entry points, unbound
    qosmanager.register_qos_ext_plugin(registry, "MyPlugin", FeatureSpec(default=False), plugin)
    qosmanager.bind_handle(registry, handle)       # once the host paths are parsed
    cli_params = registry.click_params()           # the plugins' flags + --qos-extension-plugins
    ...                                            # after parsing:
    manager = qosmanager.Manager(
        registry,
        builtin_gates=agent_gates,                 # anything with .enabled(name) -> bool
        extension_gates=registry.extension_gates(args.qos_extension_plugins),
        health=health, metrics=metrics,
    )
    manager.setup_all(client, metric_cache, states)   # PluginSetupError names the plugin
    manager.start(stop)                                # returns; waits for the first sync
    qosmanager.stop_on_sigterm(stop); manager.wait()

Plugins see the node through `States` and report through `Health`; both are
Protocols the agent implements. Out-of-tree plugins are packages declaring an
entry point in group `QOS_PLUGIN_GROUP` (`nodeqos.agent.qos_plugins`); see
`qosmanager.discovery` and docs/plugins.md.
"""

from qosmanager.discovery import GROUP as QOS_PLUGIN_GROUP
from qosmanager.evictor import (
    Decision,
    EvictionAPI,
    Evictor,
    EvictorConfig,
    KubeEvictionAPI,
)
from qosmanager.executor import ClaimRefused, ResourceExecutor
from qosmanager.features import (
    BUILTIN_FEATURES,
    Feature,
    FeatureGates,
    FeatureSpec,
    GateSet,
    Stage,
)
from qosmanager.framework import (
    Backoff,
    ExtensionPlugin,
    Manager,
    PluginRegistry,
    PluginSetupError,
    Registration,
    Revertible,
    SyncTimeout,
    register_qos_ext_plugin,
    stop_on_sigterm,
)
from qosmanager.metrics import QoSMetrics
from qosmanager.plugins import Handle, PeriodicStrategy, bind_handle, builtin_registry
from qosmanager.plugins import registry as plugin_registry
from qosmanager.states import ContainerMeta, Health, PodMeta, States

__all__ = [
    "BUILTIN_FEATURES",
    "QOS_PLUGIN_GROUP",
    "Backoff",
    "ClaimRefused",
    "ContainerMeta",
    "Decision",
    "EvictionAPI",
    "Evictor",
    "EvictorConfig",
    "ExtensionPlugin",
    "Feature",
    "FeatureGates",
    "FeatureSpec",
    "GateSet",
    "Handle",
    "Health",
    "KubeEvictionAPI",
    "Manager",
    "PeriodicStrategy",
    "PluginRegistry",
    "PluginSetupError",
    "PodMeta",
    "QoSMetrics",
    "Registration",
    "ResourceExecutor",
    "Revertible",
    "Stage",
    "States",
    "SyncTimeout",
    "bind_handle",
    "builtin_registry",
    "plugin_registry",
    "register_qos_ext_plugin",
    "stop_on_sigterm",
]
