"""deploy/grafana/hrxd-dashboard.json against a real hrxd's /metrics.

run_grafana_test.sh starts hrxd with --metrics_listen and --metrics_tenants
and makes some traffic (a session, a refusal); these cases scrape it and
check that the dashboard asks only for series the daemon serves, with the
labels it serves, that it shows every metric family, and that every family
is documented in docs/operations.md.
"""
import json
import os
import re
import urllib.request

import pytest

RUNFILES = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
DASHBOARD = json.load(open(os.path.join(RUNFILES, "deploy/grafana/hrxd-dashboard.json")))
OPERATIONS = open(os.path.join(RUNFILES, "docs/operations.md")).read()
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right",
                "offset", "bool", "and", "or", "unless"}


def panels(items):
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))


EXPRESSIONS = [t["expr"] for p in panels(DASHBOARD["panels"]) for t in p.get("targets", [])]


@pytest.fixture(scope="module")
def scrape():
    """metric family -> set of label names, from the live daemon."""
    text = urllib.request.urlopen(
        f"http://{os.environ['HRX_METRICS']}/metrics", timeout=10).read().decode()
    families = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s", line)
        assert match, f"not Prometheus text: {line!r}"
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"", match.group(3) or ""))
        families.setdefault(match.group(1), set()).update(labels)
    return families


def metrics_in(expr):
    return set(re.findall(r"\bhrxd_[a-z_]+\b", expr))


def test_the_dashboard_is_importable():
    assert DASHBOARD["uid"] == "hrxd" and DASHBOARD["title"] == "hrxd"
    ids = [p["id"] for p in panels(DASHBOARD["panels"])]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in panels(DASHBOARD["panels"]):
        if panel.get("type") != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_every_query_asks_for_served_series(scrape):
    assert EXPRESSIONS
    for expr in EXPRESSIONS:
        for metric in metrics_in(expr):
            assert metric in scrape, f"{metric} (in {expr!r}) is not served"


def test_every_label_a_query_uses_is_served(scrape):
    for expr in EXPRESSIONS:
        served = set().union(*(scrape[m] for m in metrics_in(expr))) | {"instance", "job", "le"}
        used = set()
        for selector in re.findall(r"\{([^}]*)\}", expr):
            used |= set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!=|!~|=)", selector))
        for grouping in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
            used |= {label.strip() for label in grouping.split(",") if label.strip()}
        assert used - PROMQL_WORDS <= served, f"{expr!r} uses labels {used - served}"


def test_every_metric_family_has_a_panel(scrape):
    shown = set().union(*(metrics_in(e) for e in EXPRESSIONS))
    assert set(scrape) - shown == set()


def test_every_metric_family_is_documented(scrape):
    for metric in scrape:
        assert f"`{metric}`" in OPERATIONS, f"{metric} is not in docs/operations.md"


def test_the_traffic_shows(scrape):
    # run_grafana_test.sh opened a session and was refused once.
    assert "tenant" in scrape["hrxd_tenant_usage"]
    assert "reason" in scrape["hrxd_refusals_total"]
