"""e2e fixtures: one environment per session (see e2e/harness.py) and a summary at the end.

``JOBMIRROR_E2E_PROVIDER=local`` (default) brings up its own three clusters, separate
from the bed of tests/ so no other test's controller can touch the manager;
``JOBMIRROR_E2E_PROVIDER=kind`` brings kind clusters up with the controller deployed (or
attaches to kept ones, see e2e/harness.py) and deletes them at the end.
``JOBMIRROR_E2E_KEEP=1`` leaves the clusters (local or kind) and the controller's files in place.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass, field

import pytest

from e2e import harness
from e2e.harness import E2EEnv, log


@dataclass
class _Record:
    nodeid: str
    title: str
    outcome: str = "passed"
    seconds: float = 0.0
    detail: str = ""


@dataclass
class _State:
    env: E2EEnv | None = None
    records: dict[str, _Record] = field(default_factory=dict)
    setup_error: str = ""


STATE = _State()
#: The fixture of e2e/test_kind_differential.py: its tests need the kind cluster without a Job controller.
NO_JOBS_FIXTURE = "kind_differential"


def _provider() -> str:
    p = os.environ.get("JOBMIRROR_E2E_PROVIDER", "local")
    if p not in ("local", "kind"):
        raise pytest.UsageError(f"JOBMIRROR_E2E_PROVIDER must be local or kind, not {p!r}")
    return p


@pytest.fixture(scope="session")
async def e2e_env(request: pytest.FixtureRequest) -> AsyncIterator[E2EEnv]:
    """Clusters up and deploy/ applied (local), or the deployed kind clusters; no controller yet."""
    keep = os.environ.get("JOBMIRROR_E2E_KEEP") == "1"
    # The cluster without kcm's Job controller costs ~20 s: made only when a selected test needs it.
    no_jobs = any(NO_JOBS_FIXTURE in getattr(item, "fixturenames", ()) for item in request.session.items)
    try:
        env = await (harness.bring_up_local(keep) if _provider() == "local"
                     else harness.bring_up_kind(keep, no_jobs_cluster=no_jobs))
    except BaseException as exc:
        STATE.setup_error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise
    STATE.env = env
    try:
        yield env
    finally:
        if env.controller is not None:
            env.controller.stop()
        await env.close()
        failed = request.session.testsfailed > 0
        if keep and env.bed is not None:
            log(f"JOBMIRROR_E2E_KEEP=1: clusters left running under {env.bed.workdir}; files in {env.workdir}")
        elif keep and env.kind is not None:
            log(f"JOBMIRROR_E2E_KEEP=1: kind clusters {env.kind.clusters} left running; attach with "
                f"JOBMIRROR_E2E_KIND_WORKDIR={env.kind.workdir}; delete with python -m kindbed down --stop-engine")
        else:
            if env.bed is not None:
                env.bed.down()
            if env.kind is not None and failed:
                log("kind: controller diagnostics before the clusters go:\n" + env.kind_diagnostics())
            await asyncio.to_thread(harness.take_down_kind, env)
            if failed:
                log(f"files kept for inspection (controller log, config, kubeconfigs): {env.workdir}")
            else:
                shutil.rmtree(env.workdir, ignore_errors=True)


@pytest.fixture(scope="session")
async def controller(e2e_env: E2EEnv) -> E2EEnv:
    """The controller running as its ServiceAccount: a local process, or the kind Deployment."""
    if e2e_env.provider == "local":
        if e2e_env.controller is None:
            await harness.start_local_controller(e2e_env)
        elif e2e_env.controller.proc.poll() is not None:
            raise AssertionError(f"the controller died earlier (exit {e2e_env.controller.proc.returncode}):\n"
                                 f"{e2e_env.controller.tail()}")
    else:
        await harness.check_kind_controller(e2e_env)
    return e2e_env


# -- reporting: controller log on failure, and a per-test summary ------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if not item.nodeid.startswith("e2e/"):
        return report
    rec = STATE.records.get(item.nodeid)
    if rec is None:
        doc = (getattr(item, "function", None).__doc__ or "").strip().splitlines() if hasattr(item, "function") else []
        title = doc[0].rstrip(".") if doc else item.name
        if doc and (callspec := getattr(item, "callspec", None)) is not None:
            title += f" [{callspec.id}]"  # parametrized: one line per case
        rec = STATE.records[item.nodeid] = _Record(item.nodeid, title)
    if call.when == "call":
        rec.seconds = report.duration
    if report.failed:
        rec.outcome = "FAILED" if call.when == "call" else "ERROR"
        if call.excinfo is not None:
            rec.detail = str(call.excinfo.value).splitlines()[0][:160] if str(call.excinfo.value) else ""
        env = STATE.env
        if env is not None and "controller" in getattr(item, "fixturenames", ()):
            report.sections.append(("controller log (tail)", env.controller_log_tail(120)))
    elif report.skipped and rec.outcome == "passed":
        rec.outcome = "skipped"
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not STATE.records and not STATE.setup_error:
        return
    tr = terminalreporter
    env = STATE.env
    tr.write_sep("=", f"jobmirror e2e summary (provider {env.provider if env else _provider()})")
    if STATE.setup_error:
        tr.write_line(f"  setup failed: {STATE.setup_error}")
    for what, secs in env.timings if env else []:
        tr.write_line(f"  {'setup':7} {secs:6.1f}s  {what}")
    for rec in STATE.records.values():
        kind = "journey" if "journey" in rec.nodeid else "check"
        mark = {"passed": "PASS", "skipped": "SKIP"}.get(rec.outcome, rec.outcome)
        line = f"  {mark:7} {rec.seconds:6.1f}s  [{kind}] {rec.title}"
        if rec.detail and mark not in ("PASS", "SKIP"):
            line += f"\n{'':18}↳ {rec.detail}"
        tr.write_line(line)
    for note in env.notes if env else []:
        tr.write_line(f"  {'measured':7}          {note}")
    total = sum(s for _, s in env.timings) if env else 0.0
    total += sum(r.seconds for r in STATE.records.values())
    tr.write_line(f"  {'':7} {total:6.1f}s  total (setup + test calls); wall clock {time.monotonic() - _T0:.1f}s")


_T0 = time.monotonic()
