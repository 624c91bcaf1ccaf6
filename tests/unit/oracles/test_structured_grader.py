"""The deterministic structured grader: field comparison with normalisation."""

from __future__ import annotations

from sregym.core.problem import GroundTruth, OracleRef
from sregym.core.trajectory import Submission
from sregym.oracles._diagnosis import grade_diagnosis
from sregym.oracles._judge import JudgeConfig
from sregym.oracles._names import same_component

GT = GroundTruth(root_cause="postgres data files sit on blocks that return EIO on read",
                 component="postgres", mechanism="latent sector errors on the data volume",
                 details=["EIO", "pgdata"], scope=["postgres", "api"])


def grade(fields: dict[str, str]):
    sub = Submission(kind="diagnosis", t=1.0, text="free text is ignored here", fields=fields)
    return grade_diagnosis(OracleRef(name="structured_grader"), GT, sub, JudgeConfig())


def test_matching_fields_pass_after_normalisation_and_it_says_it_is_not_the_judge():
    g = grade({"component": "StatefulSet/Postgres", "mechanism": "Latent sector errors (disk) on data volume",
               "details": "reads of pgdata return eio"})
    assert g.oracle == "structured_grader" and g.judge_model is None
    assert g.passed is True and g.score == 1.0


def test_pod_name_of_the_component_counts_but_a_sibling_does_not():
    assert same_component("postgres-0", "postgres")
    assert same_component("geo-7d9f8c6b5-x2x9q", "geo")
    assert not same_component("geo-cache", "geo")
    assert not same_component("postgres-exporter", "postgres")


def test_wrong_component_fails_even_with_right_mechanism():
    g = grade({"component": "api", "mechanism": "latent sector errors on the data volume", "details": "EIO pgdata"})
    assert g.dimensions["localization"] == 0.0 and g.passed is False


def test_wrong_mechanism_fails():
    g = grade({"component": "postgres", "mechanism": "connection pool exhausted", "details": "max_connections"})
    assert g.dimensions["characterization"] == 0.0 and g.passed is False


def test_no_fields_is_a_fail_with_a_reason():
    g = grade({})
    assert g.passed is False and "no structured fields" in g.errors[0]
