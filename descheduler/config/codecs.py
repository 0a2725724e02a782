"""The config codecs, kept under this name for out-of-tree plugins: see `kube.configcodecs`."""

from kube.configcodecs import *  # noqa: F403  (the whole public set, unchanged)
from kube.configcodecs import __all__ as _codecs_all
from kube.configstruct import Codec, describe

__all__ = ["Codec", "describe", *_codecs_all]
