"""sregym: benchmark and train AI agents on live SRE incidents in a real Kubernetes cluster."""

__version__ = "0.1.0"
