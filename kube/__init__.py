"""Kubernetes-facing foundations shared by the agent and the descheduler.

Typed models of the CRDs nodeqos speaks (NodeMetric, NodeSLO, PodMigrationJob),
pod and node views, resource quantities, QoS and priority classification, client
construction, list-watch caches, leader election, and the local control plane
used by tests and the demo. Imports nothing else of nodeqos.
"""
