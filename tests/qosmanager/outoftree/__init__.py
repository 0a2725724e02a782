"""Out-of-tree QoS plugins for the discovery tests, loaded by module path like a user's."""
