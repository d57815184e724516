"""Every alert of the PrometheusRule has a runbook page in docs/runbooks/, and its runbook_url points at it."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "docs" / "runbooks"
URL_PREFIX = "https://github.com/jobmirror/jobmirror/blob/main/docs/runbooks/"
RULE = yaml.safe_load((ROOT / "deploy/monitoring/jobmirror-alerts.yaml").read_text())
ALERTS = [r for g in RULE["spec"]["groups"] for r in g["rules"] if "alert" in r]


def test_every_alert_links_its_runbook_page() -> None:
    for rule in ALERTS:
        url = rule["annotations"].get("runbook_url", "")
        assert url == f"{URL_PREFIX}{rule['alert']}.md", f"{rule['alert']}: runbook_url {url!r}"
        page = RUNBOOKS / f"{rule['alert']}.md"
        assert page.is_file(), f"{rule['alert']}: write {page.relative_to(ROOT)}"
        assert page.read_text().startswith(f"# {rule['alert']}\n"), page


def test_every_runbook_page_belongs_to_an_alert_and_is_listed() -> None:
    names = {r["alert"] for r in ALERTS}
    pages = {p.stem for p in RUNBOOKS.glob("*.md")} - {"index"}
    assert pages == names, f"pages without an alert: {pages - names}; alerts without a page: {names - pages}"
    index = (RUNBOOKS / "index.md").read_text()
    assert all(f"({n}.md)" in index for n in names)
