"""The `local` provider: upstream Kubernetes components as host processes, no Docker."""
