"""The agent's embedded time-series and key/value store (see metriccache.store)."""
