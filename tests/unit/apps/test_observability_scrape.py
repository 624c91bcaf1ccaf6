"""How often Prometheus scrapes is what the SLO oracles' lag and sampling follow (``helm template``,
no cluster): the pods that export the load generators' counters are scraped at the chart's
``podScrapeInterval``, the heavier node jobs at the global interval, and the oracle's lag, default
rate window and sampling are derived from the rendered interval, not from a copy of it."""

from __future__ import annotations

import pytest
import yaml

from sregym.apps import observability
from sregym.cluster.charts import template
from sregym.core.constants import OBSERVABILITY_NAMESPACE
from sregym.core.durations import parse_duration
from sregym.core.promql import MIN_RATE_WINDOW_SECONDS, scrape_interval_seconds

pytestmark = pytest.mark.usefixtures("helm")  # tests/unit/apps/conftest.py


def scrape_config() -> dict:
    docs = yaml.safe_load_all(template(observability.CHART, OBSERVABILITY_NAMESPACE, {},
                                       release=observability.RELEASE))
    [cm] = [d for d in docs if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "prometheus-config"]
    return yaml.safe_load(cm["data"]["prometheus.yml"])


def test_the_pods_that_export_slo_metrics_are_scraped_every_few_seconds():
    config = scrape_config()
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    pods = jobs["kubernetes-pods"]
    interval = parse_duration(pods["scrape_interval"])
    assert interval == scrape_interval_seconds() <= 2
    # Prometheus refuses a config whose timeout exceeds the interval
    assert parse_duration(pods["scrape_timeout"]) <= interval
    # cAdvisor and the kubelet (thousands of series, read by the agent only) keep the coarse global one
    assert "scrape_interval" not in jobs["cadvisor"] and parse_duration(config["global"]["scrape_interval"]) >= 10


def test_the_slo_oracle_lags_one_rate_window_and_one_scrape_and_samples_no_faster_than_scrapes():
    from oracles.slo import SloOracle, sample_interval

    scrape = scrape_interval_seconds()
    default = SloOracle.parse_params({})
    assert parse_duration(default.rate_window) == MIN_RATE_WINDOW_SECONDS
    # a rate needs several scrapes and ~100 requests at the load generator's 5 per second
    assert MIN_RATE_WINDOW_SECONDS >= 5 * scrape and MIN_RATE_WINDOW_SECONDS * 4.3 >= 85
    assert SloOracle.lag_seconds(SloOracle.parse_params({"rate_window": "30s"})) == 30 + scrape
    assert sample_interval(default) >= scrape
    assert sample_interval(SloOracle.parse_params({"interval_seconds": 15})) == 15
