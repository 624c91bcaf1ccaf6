"""The log query service's parsing and filtering over a fake /var/log/pods tree (pure files)."""

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[3] / "charts/observability/images/log-query/logquery.py"
_spec = importlib.util.spec_from_file_location("sregym_logquery", _PATH)
lq = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = lq  # dataclasses look their module up
_spec.loader.exec_module(lq)

NOW = lq.parse_rfc3339("2026-11-21T12:00:00Z")


def write_log(root: Path, ns: str, pod: str, container: str, lines: list[str]) -> None:
    d = root / f"{ns}_{pod}_0123-uid" / container
    d.mkdir(parents=True, exist_ok=True)
    (d / "0.log").write_text("".join(line + "\n" for line in lines))


@pytest.fixture
def pods(tmp_path):
    write_log(tmp_path, "shop", "api-7d9f-abcde", "api", [
        "2026-11-21T11:50:00.000000001Z stdout F request_id=r1 GET /cart 200",
        "2026-11-21T11:55:00.123456789Z stderr F request_id=r2 database timeout",
    ])
    write_log(tmp_path, "shop", "web-5c-xyz", "nginx", [
        "2026-11-21T11:56:00Z stdout F request_id=r2 upstream error 502",
    ])
    write_log(tmp_path, "node-ops", "agent-1", "agent", ["2026-11-21T11:57:00Z stdout F request_id=r2 hidden"])
    return tmp_path


def query(root, **params):
    flt = lq.parse_filter({k: [v] for k, v in params.items()}, NOW)
    return lq.scan(root, flt, "node-1", frozenset({"node-ops"}))


def test_cri_lines_parse_with_nanoseconds():
    when, stream, text = lq.parse_cri_line("2026-11-21T11:55:00.123456789Z stderr F hello world\n")
    assert stream == "stderr" and text == "hello world"
    assert when == pytest.approx(NOW - 300 + 0.123456789)


def test_text_search_finds_a_request_id_across_pods_in_time_order(pods):
    lines = query(pods, text="REQUEST_ID=r2")
    assert [(line["pod"], line["container"]) for line in lines] == [("api-7d9f-abcde", "api"), ("web-5c-xyz", "nginx")]
    assert lines[0]["stream"] == "stderr" and lines[0]["node"] == "node-1"


def test_hidden_namespace_is_never_returned(pods):
    assert all(line["namespace"] != "node-ops" for line in query(pods, text="r2"))
    assert query(pods, namespace="node-ops") == []


def test_pod_prefix_container_and_time_window(pods):
    assert [line["line"] for line in query(pods, pod="api-")] == [
        "request_id=r1 GET /cart 200", "request_id=r2 database timeout"]
    assert query(pods, container="nginx")[0]["pod"] == "web-5c-xyz"
    assert [line["line"] for line in query(pods, since="4m")] == ["request_id=r2 upstream error 502"]
    assert [line["line"] for line in query(pods, until="2026-11-21T11:51:00Z")] == ["request_id=r1 GET /cart 200"]


def test_regex_and_limit_keep_the_newest(pods):
    assert len(query(pods, regex=r"request_id=r\d")) == 3
    assert [line["line"] for line in query(pods, limit="1")] == ["request_id=r2 upstream error 502"]


def test_bad_parameters_are_value_errors():
    with pytest.raises(ValueError):
        lq.parse_filter({"since": ["yesterday"]}, NOW)
    with pytest.raises(ValueError):
        lq.parse_filter({"regex": ["("]}, NOW)
    with pytest.raises(ValueError):
        lq.parse_filter({"limit": ["0"]}, NOW)


def test_merge_orders_nodes_by_time_and_reports_truncation():
    a = [{"ts": 1.0, "line": "a1"}, {"ts": 3.0, "line": "a3"}]
    b = [{"ts": 2.0, "line": "b2"}]
    lines, truncated = lq.merge([a, b], limit=2)
    assert [line["line"] for line in lines] == ["b2", "a3"] and truncated
