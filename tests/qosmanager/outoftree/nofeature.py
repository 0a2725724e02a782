"""A QoS plugin package missing part of the surface: no FEATURE."""

from tests.qosmanager.example_plugin import BEPodCounter

NAME = "NoFeature"
factory = BEPodCounter
