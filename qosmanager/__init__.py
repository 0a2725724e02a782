"""The node QoS framework: extension plugins, resource executor, evictor, strategies."""
