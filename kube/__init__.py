"""Kubernetes-facing foundations shared by the agent and the descheduler.

Typed models of the CRDs nodeqos speaks (NodeMetric, NodeSLO, PodMigrationJob),
pod and node views, resource quantities, QoS and priority classification, client
construction, list-watch caches, a keyed work queue and leader election. Imports
nothing else of nodeqos. (The local control plane the tests and the demo run on is `testbed`.)
"""
