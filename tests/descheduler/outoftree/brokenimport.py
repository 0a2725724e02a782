"""A plugin package whose import fails (a missing dependency, say)."""

raise ImportError("No module named 'somedependency'")
