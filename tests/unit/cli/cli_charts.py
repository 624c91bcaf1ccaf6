"""A minimal Helm chart for the CLI tests: a researcher's app, rendered by the real helm."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_chart(root: Path, name: str, objects: list[dict]) -> Path:
    """``root/name``: a chart whose one template is ``objects`` (no values); returns ``root``."""
    chart = root / name
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": "0.1.0"}))
    (chart / "templates" / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    return root


def deployment(name: str, container: str | None = None) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": container or name, "image": "busybox"}]}}}}


def configmap(name: str, data: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
