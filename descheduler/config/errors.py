"""Field paths and config errors, kept under this name for out-of-tree plugins: see `kube.configstruct`."""

from kube.configstruct import ConfigError, Errors, FieldError, FieldPath, Invalid, Reported

__all__ = ["ConfigError", "Errors", "FieldError", "FieldPath", "Invalid", "Reported"]
