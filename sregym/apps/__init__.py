"""Our applications: descriptors (topology, data stores, workload, SLOs), their Helm releases and
SLO measurement. Used by the conductor and the oracles.

- ``load_app(name) -> AppSpec``; ``list_apps()``
- ``deploy(cluster, app, namespace=None, values=None) -> DeployResult`` (reuses a healthy release at
  the same chart hash), ``status(cluster, app, namespace=None) -> AppStatus``,
  ``wait_ready(cluster, app, namespace=None, timeout=600) -> AppStatus``,
  ``delete(cluster, app, namespace=None, purge_data=False) -> bool``
- ``measure_slos(prometheus_url, app, namespace, window_s) -> {slo: {value, objective, kind, met, query}}``
- ``serving_diagnosis(prometheus_url, namespace) -> [line]``: what the app's services show wrong now
- ``app_driver(charts_dirs) -> AppsDriver``: the conductor's deploy/health/baseline contract
"""

from sregym.apps.driver import AppsDriver, DeployedApp, app_driver
from sregym.apps.lifecycle import AppStatus, DeployResult, delete, deploy, status, wait_ready
from sregym.apps.slo import measure_slos, serving_diagnosis
from sregym.apps.spec import AppSpec, SloSpec, WorkloadSpec, charts_root, list_apps, load_app

__all__ = [
    "AppSpec", "AppStatus", "AppsDriver", "DeployResult", "DeployedApp", "SloSpec", "WorkloadSpec", "app_driver",
    "charts_root", "delete", "deploy", "list_apps", "load_app", "measure_slos", "serving_diagnosis", "status", "wait_ready",
]
