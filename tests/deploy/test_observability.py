"""deploy/observability: the Grafana dashboard and the alerting rules parse, and every query
names only series that shared/metrics.py defines (a renamed metric breaks this, not a graph)."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from prometheus_client.metrics import MetricWrapperBase

from shared import metrics
from tests.deploy.manifests import REPO

OBSERVABILITY = REPO / "deploy" / "observability"
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": ("",),
}


def defined_series() -> set[str]:
    names: set[str] = set()
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            for family in value.describe():
                names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def referenced(expr: str) -> set[str]:
    return set(re.findall(r"\binterlock_[a-z_]+", expr))


def test_every_dashboard_panel_queries_defined_metrics() -> None:
    dashboard: dict[str, Any] = json.loads((OBSERVABILITY / "interlock-dashboard.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert exprs and all(p["datasource"]["uid"] == "${datasource}" for p in dashboard["panels"])
    known = defined_series()
    for expr in exprs:
        assert referenced(expr), expr
        assert referenced(expr) <= known, expr


def test_every_alert_queries_defined_metrics() -> None:
    rules = yaml.safe_load((OBSERVABILITY / "alerts.yaml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    # What an operator is paged for: stuck executions, lag, dead-letter growth, late reviews.
    assert {
        "InterlockStuckExecutions",
        "InterlockConsumerLag",
        "InterlockDeadLetters",
        "InterlockReviewsPastDeadline",
        "InterlockReviewsExpiring",
    } <= {a["alert"] for a in alerts}
    known = defined_series()
    for alert in alerts:
        assert referenced(alert["expr"]), alert["alert"]
        assert referenced(alert["expr"]) <= known, alert["alert"]
        assert alert["labels"]["severity"] and alert["annotations"]["summary"]
