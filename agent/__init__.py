"""The nodeqos node agent: collectors, states informer, NodeMetric reporter, CLI."""
