"""The nodeqos descheduler: config API, framework, plugins, evictor, CLI."""
