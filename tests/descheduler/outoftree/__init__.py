"""Out-of-tree descheduler plugins for the discovery tests, loaded by module path like a user's."""
