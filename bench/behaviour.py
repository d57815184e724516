"""``bench behaviour``: one catalogue of Jobs through jobmirror and through MultiKueue.

Each case is a manager Job (and, for some, a user action while it runs: resume,
suspend, scale, delete). The same watch records, for every manager Job, the sequence of
its conditions as they appeared and its final status; the report puts the two systems
side by side. One bed per system with a Kubernetes 1.35 worker runs the catalogue; a
second bed per system with a 1.30 worker (``--test-versions`` binaries) runs the cases marked
``skew``. Pods are kwok pods driven by ``config/kwok-stages.yaml`` (outcome label, duration
and exit-code annotations), so "failing" is a pod that exits non-zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import compare, env
from bench.machine import git_info, load, machine_info, now_iso
from bench.multikueue import queued_job
from bench.workload import job_manifest
from clusterbed import versions
from clusterbed.cluster import ClusterBed, ClusterSpec, scratch_dir
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import Informer
from kruntime.resources import JOBS, Obj
from mirror.naming import DEFAULT_CONTROLLER_NAME
from testkit.waiting import ensure_namespace

NAMESPACE = "behaviour"
OUTCOME_LABEL = "jobmirror.dev/kwok-outcome"
DURATION = "jobmirror.dev/kwok-duration"
EXIT_CODE = "jobmirror.dev/kwok-exit-code"

Action = Callable[[ClusterClient, str], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    spec: dict[str, Any] = field(default_factory=dict)  # merged into the Job spec
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    #: (seconds after the remote copy first has an active pod, action name, action)
    actions: tuple[tuple[float, str, Action], ...] = ()
    #: for the created-suspended case: act this many seconds after creation instead
    start_suspended: bool = False
    skew: bool = False  # also run on the 1.30 worker


def _patch_spec(patch: Obj) -> Action:
    async def act(mgr: ClusterClient, name: str) -> None:
        await mgr.patch(JOBS, NAMESPACE, name, {"spec": patch})
    return act


async def _delete(mgr: ClusterClient, name: str) -> None:
    await mgr.delete(JOBS, NAMESPACE, name)


CASES: tuple[Case, ...] = (
    Case("plain", "one pod, succeeds", skew=True),
    Case("failing-backoff", "pods exit 1, backoffLimit 1", {"backoffLimit": 1}, {OUTCOME_LABEL: "fail"}, skew=True),
    Case("indexed-success-policy", "Indexed 3/3, successPolicy succeededIndexes 0 (count 1)",
         {"completionMode": "Indexed", "completions": 3, "parallelism": 3,
          "successPolicy": {"rules": [{"succeededIndexes": "0", "succeededCount": 1}]}}),
    Case("backoff-limit-per-index", "Indexed 2/2, backoffLimitPerIndex 0, every index fails",
         {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimitPerIndex": 0,
          "backoffLimit": None}, {OUTCOME_LABEL: "fail"}),
    Case("pod-failure-policy-failjob", "exit 42 matches a FailJob rule",
         {"podFailurePolicy": {"rules": [{"action": "FailJob",
                                          "onExitCodes": {"operator": "In", "values": [42]}}]}},
         {OUTCOME_LABEL: "fail"}, {EXIT_CODE: "42"}),
    Case("suspended-then-resumed", "created suspended, resumed 5 s later", start_suspended=True,
         actions=((5.0, "resume", _patch_spec({"suspend": False})),)),
    Case("suspended-mid-run", "30 s pod; suspended 2 s into the run, resumed 8 s later",
         pod_annotations={DURATION: "30s"},
         actions=((2.0, "suspend", _patch_spec({"suspend": True})),
                  (10.0, "resume", _patch_spec({"suspend": False})))),
    Case("parallelism-changed", "completions 4, parallelism 1 → 4 two seconds into the run",
         {"completions": 4, "parallelism": 1}, pod_annotations={DURATION: "4s"},
         actions=((2.0, "scale", _patch_spec({"parallelism": 4})),)),
    Case("deleted-mid-run", "60 s pod; manager Job deleted 2 s into the run", pod_annotations={DURATION: "60s"},
         actions=((2.0, "delete", _delete),)),
    Case("active-deadline", "60 s pod, activeDeadlineSeconds 8", {"activeDeadlineSeconds": 8},
         pod_annotations={DURATION: "60s"}),
)


def manifest(case: Case, system: str, run_id: str) -> Obj:
    job = job_manifest(case.name, run_id, managed_by=DEFAULT_CONTROLLER_NAME if system == "jobmirror" else None,
                       requests=compare.REQUESTS)
    spec = job["spec"]
    for k, v in case.spec.items():
        if v is None:
            spec.pop(k, None)
        else:
            spec[k] = copy.deepcopy(v)
    tmpl = spec["template"]["metadata"]
    tmpl["labels"].update(case.pod_labels)
    tmpl["annotations"].update(case.pod_annotations)
    if case.start_suspended:
        spec["suspend"] = True
    if system == "multikueue":
        # Kueue's webhook suspends every queued Job (suspend is its admission lever), so
        # "created suspended" is the same manifest there: a difference in itself.
        job = queued_job(job)
    return job


def condition_key(c: Obj) -> str:
    reason = c.get("reason")
    return f"{c.get('type')}={c.get('status')}" + (f"({reason})" if reason else "")


@dataclass
class Record:
    conditions: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)  # suspend flips, deletion, actions, timings
    final: Obj | None = None
    deleted: bool = False
    remote_active_at: float | None = None
    remote_gone_at: float | None = None
    created_at: float = 0.0
    remote_seen: bool = False
    remote_final: Obj | None = None  # the worker copy as last seen (its own Job controller's view)

    def on_manager(self, obj: Obj, etype: str) -> None:
        if etype == "DELETED":
            self.deleted = True
            self.events.append(f"{time.time() - self.created_at:.1f}s manager Job deleted")
            return
        seen = set(self.conditions)
        for c in (obj.get("status") or {}).get("conditions") or []:
            k = condition_key(c)
            if k not in seen:
                self.conditions.append(k)
                seen.add(k)
        self.final = obj


def summarize_status(obj: Obj | None) -> Obj | None:
    if obj is None:
        return None
    st = obj.get("status") or {}
    keep = ("active", "ready", "succeeded", "failed", "terminating", "completedIndexes", "failedIndexes")
    out: Obj = {k: st[k] for k in keep if k in st}
    out["startTime"] = "set" if st.get("startTime") else None
    out["completionTime"] = "set" if st.get("completionTime") else None
    out["conditions"] = [condition_key(c) for c in st.get("conditions") or []]
    out["spec.suspend"] = (obj.get("spec") or {}).get("suspend")
    return out


def terminal(obj: Obj | None) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in ((obj or {}).get("status") or {}).get("conditions") or [])


async def run_catalogue(system: str, cases: list[Case], kube_version: str, out: Path,
                        timeout: float = 150) -> dict[str, Any]:
    """Bring up manager + one worker of ``kube_version``, run ``cases`` through ``system``, record."""
    key = {"jobmirror": "jobmirror", "multikueue": "multikueue"}[system]
    contender = compare.CONTENDERS[key]
    bed = ClusterBed(scratch_dir(f"jobmirror-behaviour-{system}-"))
    worker = "worker-1"
    res: dict[str, Any] = {"system": system, "workerKubernetes": kube_version, "cases": {}}
    running: compare.Running | None = None
    try:
        clusters = await env.bring_up(bed, [ClusterSpec("manager", nodes=0),
                                            ClusterSpec(worker, nodes=2, kube_version=kube_version)])
        mgr = await env.client_for(clusters["manager"])
        wcl = await env.client_for(clusters[worker])
        for c in (mgr, wcl):
            await ensure_namespace(c, NAMESPACE)
        running = await compare.start(contender, bed, clusters, out / "logs" / "behaviour", 0,
                                      workers=(worker,), namespaces=(NAMESPACE,))
        run_id = uuid.uuid4().hex[:8]
        records = {c.name: Record() for c in cases}
        by_name = {c.name: c for c in cases}

        def on_mgr(etype: str, old: Obj | None, new: Obj) -> None:
            r = records.get(new["metadata"]["name"])
            if r is not None:
                r.on_manager(new, etype)

        def on_worker(etype: str, old: Obj | None, new: Obj) -> None:
            r = records.get(new["metadata"]["name"])
            if r is None:
                return
            r.remote_seen = True
            if etype == "DELETED":
                r.remote_gone_at = time.time()
                return
            r.remote_final = new
            if r.remote_active_at is None and ((new.get("status") or {}).get("active") or 0) > 0:
                r.remote_active_at = time.time()

        minf = Informer(mgr, JOBS, namespace=NAMESPACE)
        minf.add_handler(on_mgr)
        winf = Informer(wcl, JOBS, namespace=NAMESPACE)
        winf.add_handler(on_worker)
        tasks = [asyncio.create_task(i.run()) for i in (minf, winf)]
        await asyncio.gather(minf.wait_synced(30), winf.wait_synced(30))

        async def drive(case: Case) -> None:
            r = records[case.name]
            r.created_at = time.time()
            await mgr.create(JOBS, NAMESPACE, manifest(case, system, run_id))
            for delay, label, act in case.actions:
                if case.start_suspended:
                    anchor: float | None = r.created_at
                else:
                    ok = await env.wait_until(lambda: r.remote_active_at is not None, 90, 0.1)
                    anchor = r.remote_active_at if ok else None
                if anchor is None:
                    r.events.append(f"{label}: skipped, the remote copy never ran a pod")
                    continue
                await asyncio.sleep(max(0.0, anchor + delay - time.time()))
                try:
                    await act(mgr, case.name)
                    r.events.append(f"{time.time() - r.created_at:.1f}s user: {label}")
                except ApiError as exc:
                    r.events.append(f"{label} failed: {exc}")
            deadline = time.time() + timeout
            while time.time() < deadline and not (terminal(r.final) or r.deleted):
                await asyncio.sleep(0.2)
            if r.deleted:
                await env.wait_until(lambda: r.remote_gone_at is not None or not r.remote_seen, 60, 0.2)
            else:
                await asyncio.sleep(3)  # let trailing status writes land
            r.events.append(f"finished watching after {time.time() - r.created_at:.1f}s")

        await asyncio.gather(*(drive(c) for c in cases))
        for name, r in records.items():
            remote = winf.get(f"{NAMESPACE}/{name}")
            res["cases"][name] = {
                "what": by_name[name].what,
                "conditionSequence": r.conditions,
                "final": summarize_status(r.final) if not r.deleted else "deleted",
                "workerCopyLastSeen": summarize_status(r.remote_final),
                "terminal": terminal(r.final),
                "events": r.events,
                "remoteCopyLeft": remote is not None,
                "remoteGoneAfterDeleteSeconds": (round(r.remote_gone_at - r.created_at, 1)
                                                 if r.deleted and r.remote_gone_at else None),
            }
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await mgr.close()
        await wcl.close()
    except Exception as exc:
        env.say(f"behaviour {system} on {kube_version} FAILED: {type(exc).__name__}: {exc}")
        res["error"] = f"{type(exc).__name__}: {exc}"[:3000]
    finally:
        if running is not None:
            res["stopped"] = await running.stop()
        await asyncio.to_thread(bed.down)
    return res


async def run(out: Path, systems: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {"benchmark": "behaviour", "date": now_iso(), "machine": machine_info(),
                              "git": git_info(), "loadAverage": {"start": load()},
                              "kueueVersion": versions.KUEUE_VERSION, "runs": []}
    for system in systems:
        env.say(f"=== behaviour: {system}, worker on {versions.KUBE_VERSION} ===")
        result["runs"].append(await run_catalogue(system, list(CASES), versions.KUBE_VERSION, out))
        env.say(f"=== behaviour: {system}, worker on {versions.OLD_KUBE_VERSION} ===")
        result["runs"].append(await run_catalogue(system, [c for c in CASES if c.skew], versions.OLD_KUBE_VERSION,
                                                  out))
    result["loadAverage"]["end"] = load()
    return result


def markdown(result: dict[str, Any]) -> str:
    """Side-by-side table: case → each system's condition sequence and final counters."""
    runs = [r for r in result["runs"] if "error" not in r]
    systems = sorted({r["system"] for r in runs})
    rows = ["| case | worker | " + " | ".join(systems) + " |", "|---|---|" + "---|" * len(systems)]
    keyed = {(r["system"], r["workerKubernetes"], name): c for r in runs for name, c in r["cases"].items()}
    seen: list[tuple[str, str]] = []
    for r in runs:
        for name in r["cases"]:
            if (name, r["workerKubernetes"]) not in seen:
                seen.append((name, r["workerKubernetes"]))
    for name, kv in seen:
        cells = []
        for s in systems:
            c = keyed.get((s, kv, name))
            if c is None:
                cells.append("-")
                continue
            fin = c["final"]
            counters = "deleted" if fin == "deleted" else ", ".join(
                f"{k}={v}" for k, v in (fin or {}).items() if k not in ("conditions",) and v not in (None, 0))
            cells.append(f"{' → '.join(c['conditionSequence']) or '(none)'}<br>{counters}")
        rows.append(f"| {name} | {kv} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def write(result: dict[str, Any], out: Path, name: str = "behaviour") -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    (out / f"{name}.md").write_text(markdown(result) + "\n")
    return path


def main(out: Path, systems: list[str]) -> Path:
    result = asyncio.run(run(out, systems))
    path = write(result, out)
    print(markdown(result))
    with contextlib.suppress(Exception):
        env.say(f"wrote {path}")
    return path
