"""PNG plots of benchmark results (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _cdf(ax: Any, values: list[float | None], label: str, style: str = "-") -> None:
    data = sorted(v for v in values if v is not None)
    if not data:
        return
    ys = [(i + 1) / len(data) for i in range(len(data))]
    ax.step(data, ys, style, where="post", label=f"{label} (n={len(data)})")


def _footer(fig: Any, result: dict[str, Any]) -> None:
    m = result.get("machine", {})
    g = result.get("git", {})
    k = (result.get("kubernetes") or {}).get("serverVersion", "?")
    la = result.get("loadAverage", {})
    fig.text(0.01, 0.005, f"{result.get('date')} · {m.get('cpuModel')} · {m.get('cores')} cores · "
             f"{m.get('memTotalGiB')} GiB · Kubernetes {k} · commit {str(g.get('commit'))[:10]}"
             f"{' (dirty tree)' if g.get('dirty') else ''} · load {la.get('start')} → {la.get('end')}",
             fontsize=7, color="dimgray")


def plot_mirror(result: dict[str, Any], path: Path) -> Path:
    runs = [r for r in result["runs"] if "error" not in r]
    rows = max(1, len(runs))
    fig, axes = plt.subplots(rows, 3, figsize=(20, 4.4 * rows), squeeze=False)
    for row, r in enumerate(runs):
        ax, ax2, ax3 = axes[row]
        tl = r["timeline"]
        for key, label in (("submitted", "manager Job created"), ("dispatched", "remote copy created"),
                           ("workerComplete", "worker Job Complete"), ("managerComplete", "manager Job Complete"),
                           ("remoteDeleted", "remote copy deleted")):
            xs = tl.get(key) or []
            ax.plot(xs, range(1, len(xs) + 1), label=label)
        _internals(ax3, r)
        th = r["throughput"]
        done = len(tl.get("managerComplete") or [])
        finish = (f"all Complete in {th['allCompleteSeconds']} s" if th["allCompleteSeconds"] is not None
                  else f"TIMED OUT with {done}/{r['jobs']} Complete")
        ax.set_title(f"{r['jobs']} Jobs: {finish}, {th['dispatchedPerSecond']} dispatches/s", fontsize=10)
        ax.set_xlabel("seconds since first create")
        ax.set_ylabel("Jobs")
        ax.legend(fontsize=7, loc="lower right")
        s = r["samples"]
        _cdf(ax2, s["dispatchWatch"], "dispatch (create sent → copy seen)")
        _cdf(ax2, s["statusWatch"], "status propagation (watch, never below 0)")
        _cdf(ax2, s["dispatchTimestamps"], "dispatch (creationTimestamps, 1 s)", "--")
        _cdf(ax2, s["statusManagedFields"], "status propagation (managedFields, 1 s)", "--")
        lat = r["latencySeconds"]
        ax2.set_title(f"latency CDF — dispatch p50/p99 {lat['dispatch']['watch']['p50']}/"
                      f"{lat['dispatch']['watch']['p99']} s, status p50/p99 "
                      f"{lat['statusPropagation']['watch']['p50']}/{lat['statusPropagation']['watch']['p99']} s "
                      "(watch)", fontsize=9)
        ax2.set_xscale("symlog", linthresh=10)
        ax2.set_xlabel("ms")
        ax2.set_ylabel("fraction of Jobs")
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=7, loc="lower right")
    fig.suptitle("jobmirror: mirror controller, manager + 2 kwok workers", fontsize=12)
    _footer(fig, result)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _rate(points: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        if t1 > t0:
            xs.append(t1)
            ys.append((v1 - v0) / (t1 - t0))
    return xs, ys


def _internals(ax: Any, r: dict[str, Any]) -> None:
    """Controller CPU %, its request rate per cluster and its work-queue depth over time."""
    cpu = [(s["t"], s["controller"]["cpu"]) for s in r.get("samplesTimeline") or [] if "controller" in s]
    xs, ys = _rate(cpu)
    ax.plot(xs, [y * 100 for y in ys], color="gray", lw=0.9, label="controller CPU % (100 = 1 core)")
    mt = r.get("controllerMetricsTimeline") or []
    for cluster in sorted({c for row in mt for c in row["requests"]}):
        xs, ys = _rate([(row["t"], row["requests"].get(cluster, 0)) for row in mt])
        ax.plot(xs, ys, lw=1, label=f"controller requests/s → {cluster}")
    ax.set_xlabel("seconds since first create")
    ax.set_ylabel("% / requests per second")
    ax.set_ylim(bottom=0)
    if mt:
        axq = ax.twinx()
        axq.plot([row["t"] for row in mt], [row["queueDepth"] for row in mt], color="black", lw=1.2, ls="--",
                 label="work-queue depth (right)")
        axq.set_ylabel("keys queued")
        axq.set_ylim(bottom=0)
        axq.legend(fontsize=7, loc="upper right")
    c = r.get("controller") or {}
    ax.set_title(f"controller: {c.get('cpuSecondsWorkload')} CPU-s, peak RSS {c.get('peakRssMiB')} MiB, "
                 f"{c.get('reconciles')} reconciles, {sum((c.get('queueRetries') or {}).values())} retries; "
                 f"machine load1 max {(r.get('loadAverage') or {}).get('max1mDuringRun')}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")


def plot_builtin(result: dict[str, Any], path: Path) -> Path:
    wls = list(result["workloads"].items())
    rows = max(1, len(wls))
    fig, axes = plt.subplots(rows, 2, figsize=(14, 4.2 * rows), squeeze=False)
    for row, (name, entry) in enumerate(wls):
        ax, ax2 = axes[row]
        for kind, color in (("kcm", "tab:blue"), ("builtin", "tab:orange")):
            d = entry.get(kind) or {}
            prog = d.get("progress") or []
            if prog:
                ax.plot([p[0] for p in prog], [p[1] for p in prog], color=color,
                        label=f"{kind}: {d.get('completionSeconds')} s")
            elif "error" in d:
                ax.plot([], [], color=color, label=f"{kind}: did not run")
        axr = ax.twinx()
        for kind, color in (("kcm", "tab:blue"), ("builtin", "tab:orange")):
            timeline = (entry.get(kind) or {}).get("controllerRequestsTimeline") or []
            rx, ry = _rate([(float(t), float(v)) for t, v in timeline])
            if rx:
                axr.plot(rx, ry, color=color, ls=":", lw=1,
                         label=f"{kind} client requests/s" + (" (whole kcm)" if kind == "kcm" else ""))
        axr.set_ylabel("controller requests/s (dotted)")
        axr.set_ylim(bottom=0)
        if axr.lines:
            axr.legend(fontsize=7, loc="upper left")
        ax.set_title(f"{name}: {entry['description']}", fontsize=9)
        ax.set_xlabel("seconds since first create")
        ax.set_ylabel("pods succeeded (from Job status)")
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(alpha=0.3)
        metrics = [("completion s", ("completionSeconds",)), ("API calls/pod", ("apiRequests", "server", "perPod")),
                   ("controller CPU s", ("process", "cpuSeconds")), ("peak RSS MiB", ("process", "peakRssMiB"))]
        vals: dict[str, list[float]] = {"kcm": [], "builtin": []}
        for kind in vals:
            for _, p in metrics:
                v: Any = entry.get(kind) or {}
                for k in p:
                    v = v.get(k) if isinstance(v, dict) else None
                vals[kind].append(float(v) if isinstance(v, (int, float)) else 0.0)
        pos = range(len(metrics))
        w = 0.38
        b1 = ax2.bar([x - w / 2 for x in pos], vals["kcm"], w, label="kube-controller-manager (whole process for "
                     "CPU/RSS)", color="tab:blue")
        b2 = ax2.bar([x + w / 2 for x in pos], vals["builtin"], w, label="builtin controller", color="tab:orange")
        for bars in (b1, b2):
            ax2.bar_label(bars, fmt="%.3g", fontsize=7)
        ax2.set_xticks(list(pos), [m[0] for m in metrics], fontsize=8)
        ax2.set_yscale("log")
        rt = entry.get("ratios") or {}
        ax2.set_title(f"builtin/kcm: completion time x{rt.get('completionTime')}, API calls per pod "
                      f"x{rt.get('apiCallsPerPod')}", fontsize=9)
        ax2.legend(fontsize=7)
    o = result.get("options", {})
    fig.suptitle(f"builtin Job controller vs kube-controller-manager — client QPS {o.get('qps')}, burst "
                 f"{o.get('burst')}, {o.get('syncs')} concurrent Job syncs, {o.get('nodes')} kwok nodes", fontsize=11)
    _footer(fig, result)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


CHAOS_COLUMNS = (("lost", "lost"), ("duplicatesDuringFault", "duplicates during fault"),
                 ("duplicatesAfterRecovery", "duplicates after recovery"), ("orphans", "orphans"),
                 ("wrongOutcomes", "wrong outcomes"), ("rejectedWrites", "rejected writes"))


def plot_chaos(result: dict[str, Any], path: Path) -> Path:
    """Per scenario: the invariant violations (left, should all be 0) and time to recover/finish (right)."""
    runs = result["runs"]
    names = [r["scenario"] for r in runs]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(18, 6))
    width = 0.8 / len(CHAOS_COLUMNS)
    for i, (key, label) in enumerate(CHAOS_COLUMNS):
        xs = [j + i * width for j in range(len(runs))]
        ax.bar(xs, [r.get(key, 0) or 0 for r in runs], width, label=label)
    for j, r in enumerate(runs):
        if "error" in r:
            ax.text(j + 0.3, 0.5, "error", rotation=90, color="red")
    ax.set_xticks([j + 0.4 for j in range(len(runs))], names, rotation=30, ha="right")
    ax.set_ylabel("count")
    ax.set_title(f"Invariant violations per scenario ({result.get('jobsPerScenario')} Jobs each, "
                 f"seed {result.get('seed')})")
    ax.legend(fontsize=8)
    xs = list(range(len(runs)))
    ax2.bar([x - 0.2 for x in xs], [r.get("recoverSeconds") or 0 for r in runs], 0.4, label="time to recover (s)")
    ax2.bar([x + 0.2 for x in xs], [r.get("secondsToFinish") or 0 for r in runs], 0.4, label="all Jobs finished (s)")
    ax2.set_xticks(xs, names, rotation=30, ha="right")
    ax2.set_ylabel("seconds")
    ax2.set_title("Recovery: last fault end → every manager Job in line with its copy")
    ax2.legend(fontsize=8)
    _footer(fig, result)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


COMPARE_COLORS = {"bare": "black", "floor": "tab:purple", "jobmirror": "tab:blue", "jobmirror-5qps": "tab:cyan",
                  "multikueue": "tab:red", "multikueue-equal": "tab:orange", "multikueue-patched": "tab:brown"}


def plot_compare(result: dict[str, Any], path: Path) -> Path:
    """One row per size: manager-Complete curves, status-propagation CDFs, and headline bars per contender."""
    runs = result["runs"]
    keys = list(result["contenders"])
    spare = itertools.cycle(["tab:green", "tab:brown", "tab:pink"])
    colors = {k: COMPARE_COLORS.get(k) or next(spare) for k in keys}  # one colour per contender in every plot
    fig, axes = plt.subplots(max(1, len(runs)), 3, figsize=(20, 4.6 * max(1, len(runs))), squeeze=False)
    for row, run in enumerate(runs):
        ax, ax2, ax3 = axes[row]
        bars: dict[str, list[float]] = {}
        for key in keys:
            r = run["results"].get(key) or {}
            label = result["contenders"][key]["label"]
            if "error" in r or not r:
                ax.plot([], [], color=colors[key], label=f"{label}: failed")
                continue
            tl = r["timeline"]
            xs = tl.get("managerComplete") or []
            done = (f"{r['throughput']['allCompleteSeconds']} s" if not r["timedOut"]
                    else f"timed out, {len(xs)}/{r['jobs']} Complete")
            ax.plot(xs, range(1, len(xs) + 1), color=colors[key], label=f"{label}: {done}")
            d = tl.get("dispatched") or []
            ax.plot(d, range(1, len(d) + 1), color=colors[key], ls=":", lw=0.9)
            _cdf(ax2, r["samples"]["statusWatch"], f"{label} status", "-")
            _cdf(ax2, r["samples"]["dispatchWatch"], f"{label} dispatch", ":")
            for line in ax2.lines[-2:]:
                line.set_color(colors[key])
            from bench.compare import dispatch_rate

            nan = float("nan")  # a timed-out run's per-Job costs cover only the Jobs that got through
            bars[key] = [float(dispatch_rate(r)[0] or 0)] + ([nan] * 4 if r["timedOut"] else [
                float(r["apiRequests"]["manager"]["perJobExcludingIdle"] or 0),
                float((r["apiRequests"].get("managerOwnCalls") or {}).get("total") or nan),
                float(r["apiRequests"]["workersCombined"]["perJobExcludingIdle"] or 0),
                1000 * float(r["controller"]["cpuSecondsPerJob"] or 0)])
        ax.set_title(f"{run['jobs']} Jobs: manager Jobs Complete (solid), remote copies created (dotted); "
                     f"order {', '.join(run['order'])}", fontsize=9)
        ax.set_xlabel("seconds since first create")
        ax.set_ylabel("Jobs")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
        ax2.set_xscale("symlog", linthresh=10)
        ax2.set_xlabel("ms: dispatch from the create sent, status from the worker's Complete received "
                       "(one clock; never negative)")
        ax2.set_ylabel("fraction of Jobs")
        ax2.set_title("status propagation (solid) and dispatch (dotted) latency CDF", fontsize=9)
        ax2.legend(fontsize=6, loc="lower right")
        ax2.grid(alpha=0.3)
        names = ["dispatches/s", "manager\ncalls/Job", "own manager\ncalls/Job", "workers\ncalls/Job", "CPU ms/Job"]
        w = 0.8 / max(1, len(bars))
        for i, (key, vals) in enumerate(bars.items()):
            b = ax3.bar([x + (i - (len(bars) - 1) / 2) * w for x in range(len(names))], vals, w,
                        color=colors[key], label=result["contenders"][key]["label"])
            ax3.bar_label(b, fmt="%.3g", fontsize=6)
        ax3.set_xticks(list(range(len(names))), names, fontsize=8)
        ax3.set_yscale("log")
        ax3.legend(fontsize=6)
        ax3.set_title("same run, same bed rebuilt per contender (log scale)", fontsize=9)
    fig.suptitle(compare_title(result), fontsize=12)
    _footer(fig, result)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def ran(result: dict[str, Any]) -> list[str]:
    """The contenders that produced a result in at least one size (one that failed to start did not run)."""
    return [k for k in result.get("contenders") or {}
            if any((r := run["results"].get(k)) and "error" not in r for run in result.get("runs") or [])]


def compare_title(result: dict[str, Any]) -> str:
    """The compare plot's title, naming only the contenders that ran (MultiKueue only if it did)."""
    names = []
    for key in ran(result):
        if key.startswith("multikueue"):
            name = f"MultiKueue v{result.get('kueueVersion')}"
        elif key == "bare":
            name = "the bare-API limit"
        elif key == "floor":
            name = "the guarantees floor"
        else:
            name = "jobmirror"
        if name not in names:
            names.append(name)
    return f"{' vs '.join(names) or 'nothing ran'} — manager + 2 kwok workers; shared 2-core machine"


PLACEMENT_COLORS = {"RoomAware": "tab:green", "LeastLoaded": "tab:red", "RoundRobin": "tab:purple"}


def plot_placement(result: dict[str, Any], path: Path) -> Path:
    """Per policy: makespan beside the lower bound, the CDF of Job time-to-start (over all Jobs, so
    Jobs that never started keep a curve below 1), Jobs Complete over time; and the memory part."""
    ran = {k: r for k, r in result["policies"].items() if "error" not in r}
    mem = result.get("memory") or {}
    has_mem = bool(mem.get("policies"))
    n = result["workload"]["jobs"]
    bound = (result.get("lowerBound") or {}).get("seconds")
    fig, axes = plt.subplots(1, 4 if has_mem else 3, figsize=(24 if has_mem else 19, 5.2), squeeze=False)
    ax, ax2, ax3 = axes[0][:3]
    names = [*ran, "lower bound"]
    for i, (policy, r) in enumerate(ran.items()):
        color = PLACEMENT_COLORS.get(policy, "tab:blue")
        if r["finished"]:
            b = ax.bar(i, r["makespanSeconds"], color=color)
            ax.bar_label(b, labels=[f"{r['makespanSeconds']} s"], fontsize=8)
        else:
            b = ax.bar(i, r["runSeconds"], color="white", edgecolor=color, hatch="//")
            why = "timed out" if r.get("stopReason") == "timeout" else "stuck for good"
            ax.bar_label(b, labels=[f"did not finish\n{r['completed']}/{n} Complete\n{why} at {r['runSeconds']} s"],
                         fontsize=8)
    if bound is not None:
        b = ax.bar(len(ran), bound, color="gray")
        ax.bar_label(b, labels=[f"{bound} s"], fontsize=8)
        ax.axhline(bound, color="gray", ls=":", lw=1)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("seconds, first create → last Job Complete")
    ax.set_title(f"makespan, {n} Jobs (lower bound: {(result.get('lowerBound') or {}).get('binding')})", fontsize=9)
    ax.margins(y=0.2)
    for policy, r in ran.items():
        color = PLACEMENT_COLORS.get(policy, "tab:blue")
        tts = sorted(x["timeToStart"] for x in r["perJob"] if x["timeToStart"] is not None)
        if tts:
            ax2.step(tts, [(i + 1) / n for i in range(len(tts))], where="post", color=color,
                     label=f"{policy}: {len(tts)}/{n} started, stuck > 60 s: {r['stuckOver60s']}")
        placed = r.get("placedSeconds") or []
        ax3.plot(placed, range(1, len(placed) + 1), color=color, ls=":", lw=1)
        done = r.get("completeSeconds") or []
        ax3.plot(done, range(1, len(done) + 1), color=color,
                 label=f"{policy}: {len(done)}/{n}, never-fit {r['neverFit']}, pending pod-s "
                       f"{r['pendingPodSeconds']:.0f}")
    r_after = float(next((r.get("stuckAfterSeconds") for r in ran.values()), None) or 60)
    ax2.axvline(r_after, color="gray", ls=":", lw=1)
    ax2.set_xlabel("seconds, manager Job created → its first pod running (object timestamps, 1 s)")
    ax2.set_ylabel("fraction of all Jobs")
    ax2.set_ylim(0, 1.02)
    ax2.set_title(f"time to start (dotted: {r_after:.0f} s)", fontsize=9)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7, loc="lower right")
    if bound is not None:
        ax3.axvline(bound, color="gray", ls=":", lw=1, label=f"lower bound {bound} s")
    ax3.set_xlabel("seconds since the first create")
    ax3.set_ylabel("manager Jobs Complete")
    ax3.set_title("Jobs Complete (solid) and placed (dotted) over time", fontsize=9)
    ax3.grid(alpha=0.3)
    ax3.legend(fontsize=7, loc="lower right")
    if has_mem:
        ax4 = axes[0][3]
        pols = list(mem["policies"])
        rss = [mem["policies"][p]["rssMiB"] or 0 for p in pols]
        peak = [mem["policies"][p]["peakRssMiB"] or 0 for p in pols]
        xs = range(len(pols))
        for vals, off, label, alpha in ((rss, -0.2, "RSS after sync", 1.0), (peak, 0.2, "peak RSS", 0.45)):
            b = ax4.bar([x + off for x in xs], vals, 0.4, label=label, alpha=alpha,
                        color=[PLACEMENT_COLORS.get(p, "tab:blue") for p in pols])
            ax4.bar_label(b, fmt="%.0f", fontsize=8)
        ax4.set_xticks(list(xs), pols)
        ax4.set_ylabel("controller MiB")
        ax4.legend(fontsize=7)
        ax4.set_title(f"{mem['podsPerWorker']} non-terminal pods x {len(mem['workers'])} workers: room views "
                      f"{mem.get('bytesPerPod')} B/pod (peak {mem.get('peakBytesPerPod')})", fontsize=9)
    what = " vs ".join([*ran, "the lower bound"] if bound is not None else list(ran)) or "nothing ran"
    fig.suptitle(f"placement: {what} — {n} Jobs, manager + 2 unequal kwok workers (seed {result.get('seed')})"
                 + ("; controller memory with room views" if has_mem else ""), fontsize=12)
    _footer(fig, result)
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


TENANT_COLORS = {"burst": "tab:red", "small-a": "tab:blue", "small-b": "tab:green"}
ORDER_STYLES = {"Arrival": ":", "FairShare": "-"}


def plot_multitenant(result: dict[str, Any], path: Path) -> Path:
    """``placement --multitenant``: makespan per order beside the lower bound, each tenant's wait
    CDF per order, and per order the tenants' dominant shares over time (shaded: every tenant had
    work waiting, the seconds the fairness index is taken over)."""
    ran = {k: r for k, r in result["orders"].items() if "error" not in r}
    bound = (result.get("lowerBound") or {}).get("seconds")
    fig, axes = plt.subplots(1, 2 + max(1, len(ran)), figsize=(6 * (2 + max(1, len(ran))), 5.2), squeeze=False)
    ax, ax2 = axes[0][:2]
    for i, (order, r) in enumerate(ran.items()):
        secs = r["makespanSeconds"] if r["makespanSeconds"] is not None else r["runSeconds"]
        b = ax.bar(i, secs, color="tab:blue" if order == "FairShare" else "tab:gray",
                   hatch="" if r["makespanSeconds"] is not None else "//")
        ax.bar_label(b, labels=[f"{secs} s ({r.get('makespanOverBound')}x)" if r["makespanSeconds"] is not None
                                else f"did not finish\n{r['completed']} Complete"], fontsize=8)
    if bound is not None:
        ax.axhline(bound, color="black", ls=":", lw=1, label=f"lower bound {bound} s")
        ax.legend(fontsize=7)
    ax.set_xticks(range(len(ran)), list(ran))
    ax.set_ylabel("seconds, first create → last Job Complete")
    ax.set_title("makespan per scheduling.order", fontsize=9)
    ax.margins(y=0.2)
    for order, r in ran.items():
        for tenant, color in TENANT_COLORS.items():
            data = sorted(j["wait"] for j in r["perJob"] if j["tenant"] == tenant and j["wait"] is not None)
            if data:
                ax2.step(data, [(i + 1) / len(data) for i in range(len(data))], ORDER_STYLES.get(order, "--"),
                         where="post", color=color, label=f"{order} {tenant} (n={len(data)})")
    ax2.set_xlabel("seconds, create sent → placed")
    ax2.set_ylabel("fraction of the tenant's Jobs")
    ax2.set_title("wait per tenant (dotted: Arrival, solid: FairShare)", fontsize=9)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7, loc="lower right")
    for ax3, (order, r) in zip(axes[0][2:], ran.items(), strict=False):
        samples = r.get("sharesOverTime") or []
        ts = [s["t"] for s in samples]
        for tenant, color in TENANT_COLORS.items():
            ax3.plot(ts, [s["shares"].get(tenant, 0) for s in samples], color=color, label=tenant)
        for s in samples:
            if s["allWaiting"]:
                ax3.axvspan(s["t"] - 0.5, s["t"] + 0.5, color="gold", alpha=0.15, lw=0)
        fa = r["fairness"]
        ax3.set_title(f"{order}: dominant shares (Jain {fa['mean']}, min {fa['min']}, over {fa['samples']} s "
                      "shaded)", fontsize=9)
        ax3.set_xlabel("seconds since the first create")
        ax3.set_ylabel("dominant share of the fleet")
        ax3.set_ylim(0, 1.02)
        ax3.grid(alpha=0.3)
        ax3.legend(fontsize=7, loc="upper right")
    n = result["workload"]["jobs"]
    fig.suptitle(f"placement --multitenant: {n} Jobs of 3 tenants (burst 10x), 2 priorities, manager + 2 unequal "
                 f"kwok workers (seed {result.get('seed')})", fontsize=12)
    _footer(fig, result)
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_fleet(result: dict[str, Any], path: Path) -> Path:
    """``fleet``: the controller's CPU, RSS and passes over the simulation, phases shaded, and the
    fake's own CPU beside (a simulation: the fake's cost is not the controller's)."""
    rows = result.get("timeline") or []
    fig, axes = plt.subplots(1, 3, figsize=(20, 4.6), squeeze=False)
    cpu_ax, rss_ax, pass_ax = axes[0]

    def rate(key: str, sub: str | None = None) -> tuple[list[float], list[float]]:
        xs, ys = [], []
        for a, b in itertools.pairwise(rows):
            va = a.get(key, {}).get(sub) if sub else a.get(key)
            vb = b.get(key, {}).get(sub) if sub else b.get(key)
            if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and b["t"] > a["t"] and vb >= va:
                xs.append(b["t"])
                ys.append((vb - va) / (b["t"] - a["t"]))
        return xs, ys

    for who in ("controller", "fleetsim"):
        xs, ys = rate(who, "cpu")
        cpu_ax.plot(xs, [100 * y for y in ys], label=who)
        pts = [(r["t"], r[who]["rssMiB"]) for r in rows if who in r and r[who].get("rssMiB")]
        rss_ax.plot([t for t, _ in pts], [v for _, v in pts], label=who)
    xs, ys = rate("passes")
    pass_ax.plot(xs, ys, label="passes/s")
    xs, ys = rate("dispatches")
    pass_ax.plot(xs, ys, label="dispatches/s")
    lag = [(r["t"], r["loopLagMaxAtMostSeconds"]) for r in rows
           if isinstance(r.get("loopLagMaxAtMostSeconds"), (int, float))]
    if lag:
        twin = pass_ax.twinx()
        twin.step([t for t, _ in lag], [v for _, v in lag], color="grey", alpha=0.6, label="loop lag max <= (s)")
        twin.set_yscale("log")
        twin.set_ylabel("loop lag (s), log")
    bounds: dict[str, list[float]] = {}
    for r in rows:
        if r.get("phase"):
            bounds.setdefault(r["phase"], []).append(r["t"])
    for ax in (cpu_ax, rss_ax, pass_ax):
        for i, (name, ts) in enumerate(bounds.items()):
            ax.axvspan(min(ts), max(ts), color=f"C{i % 10}", alpha=0.07)
            ax.text(min(ts), 1.0, name, transform=ax.get_xaxis_transform(), fontsize=7, va="bottom")
        ax.set_xlabel("seconds since the simulation was up")
        ax.legend(fontsize=7, loc="upper left")
    cpu_ax.set_ylabel("CPU % (100 = one core)")
    rss_ax.set_ylabel("RSS MiB")
    o = result["options"]
    fig.suptitle(f"SIMULATION — {o['workers']} workers x {o['pods_per_worker']} pods, {o['running']} running Jobs",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
