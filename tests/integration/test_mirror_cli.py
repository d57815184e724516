"""``jobmirror check-config`` and ``jobmirror status`` as a user runs them: a subprocess against real clusters."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterbed import versions
from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS
from mirror.naming import ANNOTATION_CLUSTER
from testkit.jobs import make_job
from tests.conftest import MANAGER, WORKER_1, WORKER_2, ensure_namespace

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VERSION = f"v{versions.KUBE_VERSION}"
ClusterFor = Callable[[ClusterSpec], LocalCluster]
ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]


@dataclass
class Run:
    rc: int
    out: str
    err: str


async def jobmirror(*args: str) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBMIRROR_")}
    env["PYTHONUNBUFFERED"] = "1"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror.cli", "--log-format", "text", *args,
        cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)  # a cold start under CI load: tens of s
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


@pytest.fixture(scope="module")
async def kubeconfigs(cluster: ClusterFor) -> dict[str, Path]:
    clusters = {n: await asyncio.to_thread(cluster, s)
                for n, s in (("manager", MANAGER), ("worker-1", WORKER_1), ("worker-2", WORKER_2))}
    return {n: c.kubeconfig for n, c in clusters.items()}


def config(kubeconfigs: dict[str, Path], **overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "managerKubeconfig": str(kubeconfigs["manager"]),
        "origin": "cli-test",
        "requestTimeout": 5,
        "workers": [{"name": w, "kubeconfig": str(kubeconfigs[w])} for w in ("worker-1", "worker-2")],
    }
    cfg.update(overrides)
    return cfg


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def unreachable_copy(kubeconfig: Path, dest: Path) -> Path:
    """The same credentials, pointed at a port nobody listens on."""
    data = yaml.safe_load(kubeconfig.read_text())
    for c in data["clusters"]:
        c["cluster"]["server"] = "https://127.0.0.1:1"
    return write(dest, data)


# -- check-config -------------------------------------------------------------------------


def _good(kc: dict[str, Path], tmp: Path) -> Path:
    return write(tmp / "good.yaml", config(kc))


def _relative(kc: dict[str, Path], tmp: Path) -> Path:
    """Kubeconfigs next to the config, named relative to it; the CLI runs from elsewhere."""
    (tmp / "conf" / "kc").mkdir(parents=True)
    for name, path in kc.items():
        shutil.copy(path, tmp / "conf" / "kc" / name)
    cfg = config({n: Path("kc") / n for n in kc})
    return write(tmp / "conf" / "jobmirror.yaml", cfg)


def _missing_kubeconfig(kc: dict[str, Path], tmp: Path) -> Path:
    cfg = config(kc)
    cfg["workers"][1]["kubeconfig"] = str(tmp / "no-such-dir" / "worker-2.kubeconfig")
    return write(tmp / "missing.yaml", cfg)


def _unreachable(kc: dict[str, Path], tmp: Path) -> Path:
    cfg = config(kc)
    cfg["workers"][0]["kubeconfig"] = str(unreachable_copy(kc["worker-1"], tmp / "dead.kubeconfig"))
    return write(tmp / "unreachable.yaml", cfg)


def _broken_yaml(kc: dict[str, Path], tmp: Path) -> Path:
    return write(tmp / "broken.yaml", "workers: [\n  - {name: worker-1\n")


def _bad_field(kc: dict[str, Path], tmp: Path) -> Path:
    return write(tmp / "bad-field.yaml", config(kc, resyncPeriod=-3))


def _unknown_field(kc: dict[str, Path], tmp: Path) -> Path:
    return write(tmp / "unknown-field.yaml", config(kc, workerLostTimout=60))


def _bad_worker_name(kc: dict[str, Path], tmp: Path) -> Path:
    cfg = config(kc)
    cfg["workers"][1]["name"] = "Worker_2"
    return write(tmp / "bad-worker.yaml", cfg)


def _missing_file(kc: dict[str, Path], tmp: Path) -> Path:
    return tmp / "does-not-exist.yaml"


def _same_cluster_twice(kc: dict[str, Path], tmp: Path) -> Path:
    """Two worker entries, one cluster (another kubeconfig file for it): an error naming both."""
    cfg = config(kc)
    cfg["workers"].append({"name": "worker-1-again", "kubeconfig": str(shutil.copy(kc["worker-1"],
                                                                                   tmp / "again.kubeconfig"))})
    return write(tmp / "same-cluster.yaml", cfg)


def _origin_unset(kc: dict[str, Path], tmp: Path) -> Path:
    cfg = config(kc)
    del cfg["origin"]
    return write(tmp / "origin-unset.yaml", cfg)


LEGACY_COPY = "legacy-copy"


CHECK_CASES: dict[str, tuple[Callable[[dict[str, Path], Path], Path], int, list[str], list[str]]] = {
    "good": (_good, 0, [f"manager .*ok .*{VERSION}", f"worker-1 .*ok .*{VERSION}", f"worker-2 .*ok .*{VERSION}",
                        r"configuration valid \(2 workers\)"], []),
    "relative-kubeconfigs": (_relative, 0, [f"manager .*ok .*{VERSION}", f"worker-1 .*ok .*{VERSION}",
                                            f"worker-2 .*ok .*{VERSION}"], []),
    "missing-kubeconfig": (_missing_kubeconfig, 1, [f"manager .*ok .*{VERSION}", f"worker-1 .*ok .*{VERSION}"],
                           [r"worker-2: kubeconfig \S*no-such-dir/worker-2\.kubeconfig: file not found"]),
    "unreachable-cluster": (_unreachable, 1, [f"worker-2 .*ok .*{VERSION}"],
                            [r"worker-1: kubeconfig \S*dead\.kubeconfig loads but the cluster does not answer"]),
    "broken-yaml": (_broken_yaml, 2, [], [r"broken\.yaml: line 2, column 3: not valid YAML"]),
    "bad-field": (_bad_field, 2, [], [r"error: \S*bad-field\.yaml: resyncPeriod: must be greater than 0, got -3"]),
    "unknown-field": (_unknown_field, 2, [], [r"error: \S*unknown-field\.yaml: workerLostTimout: unknown key; did you "
                                              r"mean 'workerLostTimeout'\?"]),
    "bad-worker-name": (_bad_worker_name, 2, [], [r"workers\[1\]\.name: .*Worker_2"]),
    "missing-config-file": (_missing_file, 2, [], [r"does-not-exist\.yaml: cannot read"]),
    "same-cluster-twice": (_same_cluster_twice, 1, [f"worker-1-again .*ok .*{VERSION}"],
                           [r"entries 'worker-1' and 'worker-1-again' are the same cluster"]),
    # An install upgraded across the default-origin change: warned, before its Jobs collide.
    "origin-unset-with-legacy-copies": (_origin_unset, 0, [f"worker-2 .*ok .*{VERSION}"], [
        rf"warning: worker-2 holds copies with jobmirror.dev/origin=jobmirror \(e.g. default/{LEGACY_COPY}\)",
        r"set `origin: jobmirror` to keep managing them"]),
}


@pytest.fixture(scope="module")
async def check_runs(kubeconfigs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every case's ``check-config`` run, as subprocesses two at a time (each is a cold Python start)."""
    paths = {case: make(kubeconfigs, tmp_path_factory.mktemp(case)) for case, (make, *_) in CHECK_CASES.items()}
    worker = await ClusterClient.from_kubeconfig("worker-2", kubeconfigs["worker-2"])
    legacy = job(LEGACY_COPY, managed_by=None, labels={"jobmirror.dev/origin": "jobmirror"}, suspend=True)
    await worker.create(JOBS, "default", legacy)
    try:
        # Two at a time: a cold start is seconds of CPU, and eleven at once on two cores shared with the
        # other CI lane ran past the 60-s limit of each (ci16).
        slots = asyncio.Semaphore(2)

        async def check(path: Path) -> Run:
            async with slots:
                return await jobmirror("check-config", str(path))

        runs = await asyncio.gather(*(check(p) for p in paths.values()))
    finally:
        await worker.delete(JOBS, "default", LEGACY_COPY)
        await worker.close()
    return dict(zip(paths, runs, strict=True))


@pytest.mark.parametrize("case", list(CHECK_CASES))
async def test_check_config(check_runs: dict[str, Run], case: str) -> None:
    _, rc, stdout_has, stderr_has = CHECK_CASES[case]
    r = check_runs[case]
    assert r.rc == rc, f"exit {r.rc}\nstdout:\n{r.out}\nstderr:\n{r.err}"
    for pattern in stdout_has:
        assert re.search(pattern, r.out), f"{pattern!r} not in stdout:\n{r.out}"
    for pattern in stderr_has:
        assert re.search(pattern, r.err), f"{pattern!r} not in stderr:\n{r.err}"
    if rc == 2:  # the config itself is bad: no cluster is contacted
        assert "checking clusters" not in r.out
    if rc == 0:
        assert "error" not in r.err.lower()


async def test_run_refuses_two_entries_for_one_cluster(kubeconfigs: dict[str, Path], tmp_path: Path) -> None:
    """``run`` checks what ``check-config`` checks before it claims anything: exit 2, both entries named."""
    cfg_path = _same_cluster_twice(kubeconfigs, tmp_path)
    data = yaml.safe_load(cfg_path.read_text())
    data["metricsAddress"] = ""
    r = await jobmirror("run", "--config", str(write(cfg_path, data)))
    assert r.rc == 2, f"exit {r.rc}\nstdout:\n{r.out}\nstderr:\n{r.err}"
    assert re.search(r"entries 'worker-1' and 'worker-1-again' are the same cluster", r.err), r.err


# -- status -------------------------------------------------------------------------------

T0, T1 = "2026-11-23T10:00:00Z", "2026-11-23T10:01:00Z"


#: a claimed Job nobody runs (no kwok stage inputs, counts left to the API server); ``status`` reads it
job = partial(make_job, kwok=False, container_name="c", completions=None, parallelism=None, backoff_limit=None)


def on(worker: str) -> dict[str, str]:
    """The annotation saying the Job was placed on ``worker``."""
    return {ANNOTATION_CLUSTER: worker}


@dataclass
class StatusRun:
    ns: str
    run: Run
    rows: dict[str, list[str]]  # first column -> the row's columns


@pytest.fixture(scope="module")
async def status_run(kubeconfigs: dict[str, Path], client_for: ClientFor,
                     tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[StatusRun]:
    ns = f"t-cli-{uuid.uuid4().hex[:8]}"
    m = await client_for(MANAGER)
    await ensure_namespace(m, ns)
    await m.create(JOBS, ns, job("placed", annotations=on("worker-1")))
    await m.create(JOBS, ns, job("pending"))
    await m.create(JOBS, ns, job("paused", suspend=True))
    done = await m.create(JOBS, ns, job("done", annotations=on("worker-2")))
    scm = {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": T1}
    done["status"] = {"startTime": T0, "completionTime": T1, "succeeded": 1, "active": 0, "ready": 0,
                      "conditions": [scm, {**scm, "type": "Complete"}]}
    await m.replace(JOBS, ns, "done", done, subresource="status")
    await m.create(JOBS, ns, job("builtin", managed_by=None))  # kube-controller-manager's, not ours
    await m.create(JOBS, ns, job("foreign", managed_by="example.com/other", annotations=on("worker-1")))

    tmp = tmp_path_factory.mktemp("status")
    cfg = config(kubeconfigs, namespaces=[ns])
    cfg["workers"].append({"name": "worker-3", "kubeconfig": str(unreachable_copy(kubeconfigs["worker-1"],
                                                                                  tmp / "dead.kubeconfig"))})
    cfg["workers"].append({"name": "worker-4", "kubeconfig": str(tmp / "absent.kubeconfig")})
    run = await jobmirror("status", "--config", str(write(tmp / "jobmirror.yaml", cfg)))
    rows = {line.split()[0]: line.split() for line in run.out.splitlines() if line.strip()}
    yield StatusRun(ns, run, rows)
    await m.request("DELETE", f"/api/v1/namespaces/{ns}")


async def test_status_exits_zero_with_both_tables(status_run: StatusRun) -> None:
    r = status_run.run
    assert r.rc == 0, f"stdout:\n{r.out}\nstderr:\n{r.err}"
    lines = r.out.splitlines()
    assert lines[0].split() == ["JOB", "WORKER", "STATE", "SUCCEEDED", "FAILED", "ACTIVE", "LAST", "SYNC"]
    assert any(line.split() == ["WORKER", "HEALTH", "VERSION", "DETAIL"] for line in lines)
    assert "4 claimed Jobs, 3 unfinished" in r.out


@pytest.mark.parametrize(
    ("name", "columns"),
    [
        ("placed", ["worker-1", "Running", "0", "0", "0", "-"]),
        ("pending", ["-", "Pending", "0", "0", "0", "-"]),
        ("paused", ["-", "Suspended", "0", "0", "0", "-"]),
        ("done", ["worker-2", "Complete", "1", "0", "0", "-"]),
    ],
    ids=["placed", "pending", "suspended", "complete"],
)
async def test_status_lists_each_claimed_job(status_run: StatusRun, name: str, columns: list[str]) -> None:
    row = status_run.rows.get(f"{status_run.ns}/{name}")
    assert row is not None, status_run.run.out
    assert row[1:] == columns


@pytest.mark.parametrize("name", ["builtin", "foreign"], ids=["no-managedBy", "other-controller"])
async def test_status_omits_jobs_it_does_not_claim(status_run: StatusRun, name: str) -> None:
    assert f"{status_run.ns}/{name}" not in status_run.run.out


@pytest.mark.parametrize(
    ("worker", "health", "detail"),
    [
        ("worker-1", "healthy", re.escape(VERSION) + r" +https://127\.0\.0\.1:\d+"),
        ("worker-2", "healthy", re.escape(VERSION) + r" +https://127\.0\.0\.1:\d+"),
        ("worker-3", "UNHEALTHY", r"- +\[worker-3\] 0 Transport"),
        ("worker-4", "BROKEN", r"- +kubeconfig \S*absent\.kubeconfig: file not found"),
    ],
    ids=["worker-1", "worker-2", "unreachable", "missing-kubeconfig"],
)
async def test_status_reports_each_worker_health(status_run: StatusRun, worker: str, health: str,
                                                 detail: str) -> None:
    line = next((ln for ln in status_run.run.out.splitlines() if ln.split()[:1] == [worker]), None)
    assert line is not None, status_run.run.out
    assert line.split()[1] == health
    assert re.search(rf"^{worker} +{health} +{detail}", line), line


@pytest.mark.parametrize("worker", ["worker-1", "worker-2"])
async def test_status_shows_each_reachable_workers_free_room(status_run: StatusRun, worker: str) -> None:
    lines = status_run.run.out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == [worker])
    room = lines[at + 1].split("room:", 1)
    assert len(room) == 2, lines[at + 1]
    assert re.fullmatch(r" cpu \S+/\S+ free, .*memory \S+/\S+ free.*; \d+ pods? pending", room[1]), room[1]
