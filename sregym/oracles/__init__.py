"""The oracle kit: everything an oracle under ``oracles/`` (or a third-party package) is written
with. Mitigation oracles judge the live system; diagnosis oracles judge the agent's text. Modules
with a leading underscore are the engine's; import from here.

A mitigation oracle subclasses :class:`MitigationOracle` and registers with
``@mitigation_oracle("name")``; a diagnosis oracle subclasses :class:`DiagnosisOracle` and
registers with ``@diagnosis_oracle("name")``. See docs/grading.md.
"""

from sregym.cluster.charts import template
from sregym.cluster.entry_path import (app_path_changes, list_app_objects, path_changes, read_app_paths,
                                       read_entry_path)
from sregym.cluster.metric_sources import exporting_pods, read_source_changes
from sregym.cluster.prometheus import query_value
from sregym.core.constants import HIDDEN_NAMESPACE, OWNER_LABEL, OWNER_VALUE
from sregym.core.durations import parse_duration
from sregym.core.errors import ClusterError, UserInputError
from sregym.core.params import NoParams
from sregym.core.problem import GroundTruth
from sregym.core.promql import MIN_RATE_WINDOW_SECONDS, fed_from_app_namespace, scrape_interval_seconds
from sregym.core.record import CheckResult, DiagnosisGrade
from sregym.core.trajectory import Submission
from sregym.oracles._actions import evidence_coverage, wrong_remediations
from sregym.oracles._api import MITIGATION_ORACLES, MitigationContext, MitigationOracle, mitigation_oracle
from sregym.oracles._checklist import load_checklist
from sregym.oracles._diagnosis import DIAGNOSIS_ORACLES, DiagnosisOracle, diagnosis_oracle, grade_diagnosis
from sregym.oracles._fields import MISSING, Condition, lookup, lookup_steps, parse_path
from sregym.oracles._judge import JudgeConfig, run_checklist_judge
from sregym.oracles._live import exec_in_pod, get_json, list_json, pods_matching, running_pod, workload_labels
from sregym.oracles._names import same_component
from sregym.oracles._netpol import Endpoint, denying_policies
from sregym.oracles._probes import container_probes, weakened, workload_probes
from sregym.oracles._reward import compute_reward, load_reward_weights
from sregym.oracles._scoring import complete_grades
from sregym.oracles._slos import Slo, baseline_value, checked_slos, render, slos_from, within
from sregym.oracles._window import (Sample, WindowParams, grade_lost, lost, max_samples, sample_window, stops_on,
                                   window_of, window_result)

__all__ = [
    # writing and registering an oracle
    "MITIGATION_ORACLES", "MitigationContext", "MitigationOracle", "mitigation_oracle",
    "DIAGNOSIS_ORACLES", "DiagnosisOracle", "diagnosis_oracle", "grade_diagnosis", "NoParams",
    # what an oracle returns and reads
    "CheckResult", "DiagnosisGrade", "GroundTruth", "Submission", "ClusterError", "UserInputError",
    "HIDDEN_NAMESPACE", "OWNER_LABEL", "OWNER_VALUE", "parse_duration",
    # probing the live system over a window
    "Sample", "WindowParams", "grade_lost", "lost", "max_samples", "sample_window", "stops_on", "window_of", "window_result",
    "exec_in_pod", "get_json", "list_json", "pods_matching", "running_pod", "workload_labels",
    "MISSING", "Condition", "lookup", "lookup_steps", "parse_path", "Endpoint", "denying_policies",
    "container_probes", "weakened", "workload_probes",
    "Slo", "baseline_value", "checked_slos", "render", "slos_from", "within",
    # who answers the app's requests, and whether that changed since the baseline
    "app_path_changes", "list_app_objects", "path_changes", "read_app_paths", "read_entry_path",
    # and who exported the app's own series an SLO reads
    "exporting_pods", "fed_from_app_namespace", "read_source_changes",
    # metrics and charts: an instant PromQL query, the metrics' timing, a chart rendered offline
    "query_value", "MIN_RATE_WINDOW_SECONDS", "scrape_interval_seconds", "template",
    # judging a diagnosis, scoring a run
    "JudgeConfig", "load_checklist", "run_checklist_judge", "same_component",
    "complete_grades", "compute_reward", "evidence_coverage", "load_reward_weights", "wrong_remediations",
]
