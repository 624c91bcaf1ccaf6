"""Charts rendered offline (``helm template``): what the chart checks and the oracles read
without a cluster."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from sregym.cluster.kube import helm_path
from sregym.core.errors import UserInputError


def template(chart: Path, namespace: str, values: dict[str, Any], release: str = "render") -> str:
    """Render the chart offline (``helm template``) with ``values``; the manifests as YAML."""
    proc = subprocess.run([helm_path(), "template", release, str(chart), "-n", namespace, "-f", "-"],
                          capture_output=True, text=True, input=json.dumps(values), timeout=120)
    if proc.returncode != 0:
        raise UserInputError(f"helm template {chart} failed: {proc.stderr.strip()[-800:]}",
                             hint="check the value overrides against the chart's values.yaml")
    return proc.stdout
