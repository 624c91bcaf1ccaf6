"""Cluster providers (local, kind, existing), kube and helm clients, images."""
