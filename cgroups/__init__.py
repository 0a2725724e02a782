"""Host access: cgroup v1/v2 detection, layout, typed readers and /proc readers."""
