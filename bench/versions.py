"""``bench versions``: the journeys of bench/journeys.py on every (manager, worker) release pair.

Per combination a manager cluster of one release and a worker cluster of another run the real
controller (in-process, one per combination, each with its own namespace and origin, so
combinations that share a cluster never see each other's Jobs), and every journey runs at
once on its own Job: a combination takes about as long as its slowest journey. The same code
runs the command (fresh clusters, deleted when no combination left needs them) and the CI test
(tests/integration/test_version_matrix.py: the session's clusters).

The plan, the verdicts and the report are pure functions (``plan``, ``cluster_uses``, ``summary``,
``markdown``); everything after ``# -- running`` is glue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.journeys import JOURNEYS, JourneyContext, run_journey
from clusterbed import versions
from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import Obj
from mirror.config import Config, Worker
from mirror.controller import MirrorController
from testkit.waiting import ensure_namespace

MANAGER = "manager"
WORKER = "worker"
DEFAULT_REPLAY_SEED = 22
DEFAULT_REPLAY_EXAMPLES = 20


@dataclass(frozen=True, order=True)
class Combination:
    manager: str
    worker: str

    def label(self) -> str:
        return f"manager {self.manager} x worker {self.worker}"


#: what CI runs (the matrix's corners): both on the default release, a worker on the oldest
#: supported one, a manager on the oldest supported one
CORNERS = (
    Combination(versions.KUBE_VERSION, versions.KUBE_VERSION),
    Combination(versions.KUBE_VERSION, versions.OLDEST_SUPPORTED_KUBE_VERSION),
    Combination(versions.OLDEST_SUPPORTED_KUBE_VERSION, versions.KUBE_VERSION),
)


def parse_versions(text: str) -> tuple[str, ...]:
    """``1.33.7,1.37`` -> supported releases (a bare minor means its supported patch)."""
    by_minor = {v.rsplit(".", 1)[0]: v for v in versions.SUPPORTED_KUBE_VERSIONS}
    out: list[str] = []
    for raw in (t.strip().removeprefix("v") for t in text.split(",")):
        if not raw:
            continue
        v = by_minor.get(raw, raw)
        if v not in versions.SUPPORTED_KUBE_VERSIONS:
            raise ValueError(f"{raw!r} is not a supported release (supported: "
                             f"{', '.join(versions.SUPPORTED_KUBE_VERSIONS)})")
        if v not in out:
            out.append(v)
    if not out:
        raise ValueError("no release given")
    return tuple(out)


def plan(managers: Sequence[str], workers: Sequence[str], *, corners: bool = False) -> list[Combination]:
    """The combinations to run, manager by manager (a manager cluster can go once its row is done)."""
    if corners:
        return list(CORNERS)
    return [Combination(m, w) for m in managers for w in workers]


def default_spec(role: str, version: str) -> ClusterSpec:
    """A manager has no nodes (Jobs there are only ever mirrored); a worker runs kwok pods."""
    return ClusterSpec(f"{role}-{version.replace('.', '-')}", kube_version=version, nodes=0 if role == MANAGER else 2)


def cluster_uses(combos: Iterable[Combination]) -> Counter[tuple[str, str]]:
    """How many combinations need each (role, release) cluster: it can go when that drops to 0."""
    uses: Counter[tuple[str, str]] = Counter()
    for c in combos:
        uses[(MANAGER, c.manager)] += 1
        uses[(WORKER, c.worker)] += 1
    return uses


# -- results (pure) ---------------------------------------------------------------------------------


def passed(combo: dict[str, Any]) -> tuple[int, int]:
    js = combo.get("journeys") or []
    return sum(1 for j in js if j["outcome"] == "passed"), len(js)


def failures(result: dict[str, Any]) -> list[str]:
    """One line per journey that did not pass, and per combination that could not run."""
    out = []
    for c in result["combinations"]:
        label = f"manager {c['manager']['version']} x worker {c['worker']['version']}"
        if c.get("error"):
            out.append(f"{label}: could not run: {c['error'].splitlines()[0][:300]}")
        for j in c.get("journeys") or []:
            if j["outcome"] != "passed":
                first = (j.get("message") or "").strip().splitlines()[:1]
                out.append(f"{label} · {j['name']} {j['outcome']} at \"{j.get('step')}\": "
                           f"{(first[0] if first else '')[:400]}")
    return out


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """Counts, and the verdict: every journey passed and the controllers logged no error (what the
    integration tests' ``check_clean`` demands too)."""
    combos = result["combinations"]
    counts = Counter(j["outcome"] for c in combos for j in c.get("journeys") or [])
    errors = len(result.get("controllerErrors") or [])
    return {"combinations": len(combos), "combinationsNotRun": sum(1 for c in combos if c.get("error")),
            "journeys": sum(counts.values()), **{k: counts.get(k, 0) for k in ("passed", "failed", "error")},
            "controllerErrors": errors, "ok": not failures(result) and not errors}


def _grid(result: dict[str, Any], cell: Callable[[dict[str, Any]], str]) -> list[str]:
    combos = result["combinations"]
    managers = sorted({c["manager"]["version"] for c in combos}, key=_version_key)
    workers = sorted({c["worker"]["version"] for c in combos}, key=_version_key)
    by = {(c["manager"]["version"], c["worker"]["version"]): c for c in combos}
    lines = ["| manager \\ worker | " + " | ".join(workers) + " |", "|---|" + "---|" * len(workers)]
    for m in managers:
        lines.append(f"| **{m}** | " + " | ".join(cell(by[(m, w)]) if (m, w) in by else "-" for w in workers) + " |")
    return lines


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _cell(c: dict[str, Any]) -> str:
    if c.get("error"):
        return "not run"
    ok, total = passed(c)
    return f"{ok}/{total}" + ("" if ok == total else " ✗")


def _note_cell(journey: str, note: str) -> Callable[[dict[str, Any]], str]:
    """A cell showing one note of one journey (the path it took), or - when it did not pass."""
    def cell(c: dict[str, Any]) -> str:
        j = next((j for j in c.get("journeys") or [] if j["name"] == journey), None)
        if j is None or j["outcome"] != "passed":
            return "-"
        return str(j["notes"].get(note, "?"))

    return cell


def markdown(result: dict[str, Any]) -> str:
    """The report: journeys passed per (manager, worker) pair, what failed, the paths taken."""
    s = result["summary"]
    lines = [
        "# jobmirror version matrix",
        "",
        # docs/versions.md includes the section below (pymdownx.snippets): one copy of the table
        "<!-- --8<-- [start:matrix] -->",
        f"{result['date']}, commit `{(result['git'].get('commit') or '?')[:10]}`"
        + (" (dirty tree)" if result["git"].get("dirty") else "") + f", {result['machine'].get('cores')} cores; "
        f"`{result['command']}`; {result['seconds']:.0f} s.",
        "",
        f"Rows: the manager's release; columns: the worker's; a cell is journeys passed / run "
        f"({', '.join(result['journeys'])}). {s['passed']}/{s['journeys']} passed.",
        "",
        *_grid(result, _cell),
        "",
    ]
    fails = failures(result)
    lines += ["**Failures:**", "", *(f"- {f}" for f in fails), ""] if fails else ["No failures.", ""]
    errors = result.get("controllerErrors") or []
    if errors:
        lines += [f"**The controllers logged {len(errors)} error(s)** (first 10):", "",
                  *(f"- `{e[:300]}`" for e in errors[:10]), ""]
    if "readmission" in result["journeys"]:
        lines += ["How the worker took the re-admission's template rewrite of the suspended copy "
                  "(`recreated`: it refused to rewrite a started copy, so the copy was deleted and created "
                  "again, `CopyRecreated`):", "", *_grid(result, _note_cell("readmission", "copyRewrite")), ""]
    if "suspend-resume" in result["journeys"]:
        lines += ["The suspended copy's `startTime` on the worker (the manager's is dropped on every release):",
                  "", *_grid(result, _note_cell("suspend-resume", "copyStartTimeWhileSuspended")), ""]
    lines += ["Seconds of each combination's journeys (all at once: the slowest decides; cluster starts not "
              "included):", "", *_grid(result, lambda c: "-" if c.get("error") else f"{c['journeysSeconds']:.0f}"),
              "", "<!-- --8<-- [end:matrix] -->", ""]
    return "\n".join(lines)


# -- running ------------------------------------------------------------------------------------------


Say = Callable[[str], None]


@dataclass
class MatrixOptions:
    journeys: tuple[str, ...] = tuple(JOURNEYS)
    #: combinations at once (each runs all its journeys at once)
    parallel: int = 2
    journey_timeout: float = 120.0
    replay_seed: int = DEFAULT_REPLAY_SEED
    replay_examples: int = DEFAULT_REPLAY_EXAMPLES


@dataclass
class ClusterPool:
    """The clusters the combinations share: started one at a time (kwokctl in one work directory
    does not take concurrent creates), and deleted, when ``delete`` is given, once no planned
    combination needs them any more."""

    ensure: Callable[[ClusterSpec], LocalCluster]
    spec_for: Callable[[str, str], ClusterSpec] = default_spec
    uses: Counter[tuple[str, str]] = field(default_factory=Counter)
    delete: Callable[[str], None] | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def get(self, role: str, version: str) -> tuple[ClusterSpec, LocalCluster]:
        spec = self.spec_for(role, version)
        async with self._lock:
            return spec, await asyncio.to_thread(self.ensure, spec)

    async def done(self, role: str, version: str) -> None:
        self.uses[(role, version)] -= 1
        if self.delete is not None and self.uses[(role, version)] <= 0:
            name = self.spec_for(role, version).name
            async with self._lock:
                await asyncio.to_thread(self.delete, name)


async def _server_version(client: ClusterClient) -> str:
    return str((await client.request("GET", "/version")).get("gitVersion"))


def _config(ns: str, manager: LocalCluster, worker_name: str, worker: LocalCluster) -> Config:
    """As the integration tests run it (tests/integration/mirror_env.py): quick resyncs and probes."""
    settings: dict[str, Any] = {
        "workers": [Worker.model_validate({"name": worker_name, "kubeconfig": worker.kubeconfig})],
        "manager_kubeconfig": manager.kubeconfig, "namespaces": [ns], "origin": f"o-{ns}", "resync_period": 2.0,
        "gc_interval": 2.0, "worker_lost_timeout": 600.0, "health_probe_interval": 0.5, "metrics_address": "",
    }
    return Config(**settings)


@contextlib.asynccontextmanager
async def _controller(cfg: Config) -> AsyncIterator[MirrorController]:
    ctrl = MirrorController(cfg)
    task = asyncio.create_task(ctrl.run(health=False))
    await asyncio.sleep(0.05)
    if task.done():
        task.result()  # a controller that died at start: the combination cannot run
    try:
        yield ctrl
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await ctrl.stop()


async def run_combination(combo: Combination, pool: ClusterPool, opts: MatrixOptions, say: Say) -> dict[str, Any]:
    """One (manager, worker) pair: clusters, controller, every journey at once; never raises but
    for cancellation (a setup failure is the combination's ``error``)."""
    t0, started = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out: dict[str, Any] = {"manager": {"version": combo.manager}, "worker": {"version": combo.worker},
                           "start": started}
    clients: list[ClusterClient] = []
    try:
        mspec, mcluster = await pool.get(MANAGER, combo.manager)
        wspec, wcluster = await pool.get(WORKER, combo.worker)
        out["manager"]["cluster"], out["worker"]["cluster"] = mspec.name, wspec.name
        manager = await ClusterClient.from_kubeconfig(f"vm-{mspec.name}", mcluster.kubeconfig, qps=0)
        clients.append(manager)
        worker = await ClusterClient.from_kubeconfig(f"vm-{wspec.name}", wcluster.kubeconfig, qps=0)
        clients.append(worker)
        for side, client, want in (("manager", manager, combo.manager), ("worker", worker, combo.worker)):
            got = out[side]["serverVersion"] = await _server_version(client)
            if got != f"v{want}":
                raise RuntimeError(f"the {side} cluster {client.name} reports {got}, not v{want}")
        ns = f"vm-{combo.manager.replace('.', '-')}-{combo.worker.replace('.', '-')}-{uuid.uuid4().hex[:6]}"
        out["namespace"] = ns
        for client in (manager, worker):
            await ensure_namespace(client, ns)
        say(f"{combo.label()}: {mspec.name} {out['manager']['serverVersion']}, {wspec.name} "
            f"{out['worker']['serverVersion']}; {len(opts.journeys)} journeys in namespace {ns}")
        async with _controller(_config(ns, mcluster, wspec.name, wcluster)) as ctrl:
            def view(name: str) -> Obj | None:
                return ctrl.jobs.get(f"{ns}/{name}") if ctrl.jobs is not None else None

            async def one(name: str) -> dict[str, Any]:
                ctx = JourneyContext(manager, worker, wspec.name, ns, f"{ns}-replay", opts.replay_seed,
                                     opts.replay_examples, controller_view=view)
                r = await run_journey(name, JOURNEYS[name], ctx, opts.journey_timeout)
                say(f"{combo.label()} · {name}: {r.outcome} in {r.seconds:.1f}s"
                    + (f" at \"{r.step}\": {(r.message or '').splitlines()[0][:200]}" if r.outcome != "passed"
                       else ""))
                return r.as_dict()

            t1 = time.monotonic()
            out["setupSeconds"] = round(t1 - t0, 1)  # waiting for a slot's clusters included
            out["journeys"] = list(await asyncio.gather(*(one(n) for n in opts.journeys)))
            out["journeysSeconds"] = round(time.monotonic() - t1, 1)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:3000]
        say(f"{combo.label()}: could not run: {out['error'].splitlines()[0][:300]}")
    finally:
        for client in clients:
            await client.close()
        await pool.done(MANAGER, combo.manager)
        await pool.done(WORKER, combo.worker)
    out["end"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["seconds"] = round(time.monotonic() - t0, 1)
    if "error" not in out:
        ok, total = passed(out)
        say(f"{combo.label()}: {ok}/{total} journeys passed in {out['journeysSeconds']:.0f}s "
            f"({out['seconds']:.0f}s with its clusters)")
    return out


class ErrorTrap(logging.Handler):
    """The controllers' records that signal trouble (an exception logged, or ERROR and above), as
    the integration tests' LogTrap keeps them; combinations share a process, so they are the run's."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            exc = f" ({record.exc_info[1]!r})" if record.exc_info and record.exc_info[1] else ""
            self.records.append(f"{record.name} {record.levelname}: {record.getMessage()}{exc}"[:2000])


@contextlib.contextmanager
def controller_errors() -> Iterator[list[str]]:
    """``with controller_errors() as errors``: what the in-process controllers logged as errors."""
    trap = ErrorTrap()
    loggers = [logging.getLogger(n) for n in ("mirror", "kruntime")]
    for lg in loggers:
        lg.addHandler(trap)
    try:
        yield trap.records
    finally:
        for lg in loggers:
            lg.removeHandler(trap)


async def run_matrix(combos: Sequence[Combination], pool: ClusterPool, opts: MatrixOptions,
                     say: Say) -> list[dict[str, Any]]:
    """Every combination, ``opts.parallel`` at once, in plan order; results in plan order."""
    unknown = sorted(set(opts.journeys) - set(JOURNEYS))
    if unknown:
        raise ValueError(f"unknown journeys {unknown}; known: {', '.join(JOURNEYS)}")
    gate = asyncio.Semaphore(max(1, opts.parallel))
    total = len(combos)

    async def gated(i: int, combo: Combination) -> dict[str, Any]:
        async with gate:
            say(f"[{i + 1}/{total}] {combo.label()}: starting")
            return await run_combination(combo, pool, opts, say)

    return list(await asyncio.gather(*(gated(i, c) for i, c in enumerate(combos))))


def result_document(combos: list[dict[str, Any]], opts: MatrixOptions, *, command: str, seconds: float,
                    date: str, machine: dict[str, Any], git: dict[str, Any],
                    errors: Sequence[str] = ()) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "benchmark": "versions", "date": date, "command": command, "machine": machine, "git": git,
        "seconds": round(seconds, 1), "journeys": list(opts.journeys),
        "replay": {"seed": opts.replay_seed, "examples": opts.replay_examples},
        "supported": list(versions.SUPPORTED_KUBE_VERSIONS), "combinations": combos,
        "controllerErrors": list(errors),
    }
    doc["summary"] = summary(doc)
    return doc
