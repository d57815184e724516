"""``python -m bench [all|mirror|builtin|compare|placement|fleet|versions|ab|chaos|behaviour|plot] [flags]``:
see bench/README.md."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.machine import REPO
from kruntime.lifecycle import positive_seconds

DEFAULT_SIZES = [100, 1000]


def _sizes(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--sizes wants comma-separated integers, got {text!r}") from exc
    if not out or any(n <= 0 for n in out):
        raise argparse.ArgumentTypeError("--sizes wants positive integers")
    return out


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, default=REPO / "results", help="results directory (default: results/)")
    common.add_argument("--name", default=None,
                        help="base name of the JSON/PNG (default: mirror / builtin-vs-kcm, suffixed for "
                             "non-default sizes and for profiled runs)")
    common.add_argument("--profile", action="store_true",
                        help="run the controller(s) under pyinstrument and write profile-*.txt (slower: "
                             "the figures of a profiled run are not the headline ones)")
    common.add_argument("--pod-duration", default="1s", help="how long each kwok pod runs (Go duration)")
    common.add_argument("--create-concurrency", type=int, default=50, help="Job creates in flight at once")

    mirror = argparse.ArgumentParser(add_help=False)
    g = mirror.add_argument_group("mirror benchmark")
    g.add_argument("--sizes", type=_sizes, default=DEFAULT_SIZES,
                   help="comma-separated Job counts (default 100,1000; the full set is 100,1000,5000)")
    g.add_argument("--worker-nodes", type=int, default=4, help="kwok nodes per worker (110 pods each)")
    g.add_argument("--timeout", type=float, default=None, help="seconds per size (default 60 + 0.3 per Job)")
    g.add_argument("--mirror-qps", type=float, default=None, help="controller client QPS (default: config default)")
    g.add_argument("--mirror-burst", type=int, default=None, help="controller client burst (default: config default)")
    g.add_argument("--unclaimed", type=int, default=0,
                   help="Jobs of another managedBy created in the manager before the controller starts "
                        "(memory must follow claimed Jobs: compare controller RSS with and without)")
    g.add_argument("--reconcile-workers", type=int, default=None,
                   help="controller workersConcurrency (default: config default)")

    builtin = argparse.ArgumentParser(add_help=False)
    h = builtin.add_argument_group("builtin vs kube-controller-manager benchmark")
    h.add_argument("--jobs", type=int, default=200, help="Jobs in the many-Jobs workload (0 skips it)")
    h.add_argument("--pods-per-job", type=int, default=10, help="completions = parallelism of each of those Jobs")
    h.add_argument("--indexed-completions", type=int, default=1000, help="the Indexed Job's completions (0 skips it)")
    h.add_argument("--indexed-parallelism", type=int, default=100, help="the Indexed Job's parallelism")
    h.add_argument("--qps", type=float, default=100.0, help="client QPS of BOTH Job controllers")
    h.add_argument("--burst", type=int, default=200, help="client burst of BOTH Job controllers")
    h.add_argument("--syncs", type=int, default=5, help="concurrent Job syncs of BOTH (kcm --concurrent-job-syncs)")
    h.add_argument("--nodes", type=int, default=20, help="kwok nodes in each cluster")
    h.add_argument("--builtin-timeout", type=float, default=600.0, help="seconds per workload and controller")

    p = argparse.ArgumentParser(prog="python -m bench", description="jobmirror benchmarks (DESIGN.md §6)")
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("all", parents=[common, mirror, builtin], help="both benchmarks (the default)")
    sub.add_parser("mirror", parents=[common, mirror], help="mirror controller throughput/latency/cost")
    sub.add_parser("builtin", parents=[common, builtin], help="builtin Job controller vs kube-controller-manager")
    ch = sub.add_parser("chaos", help="fault scenarios judged by the invariant checker (results/chaos.json + .png)")
    ch.add_argument("--jobs", type=int, default=200, help="Jobs in flight per scenario and manager (default 200)")
    ch.add_argument("--scenario", action="append", default=None,
                    help="run only this scenario (repeatable; default: all)")
    ch.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed)")
    ch.add_argument("--timeout", type=float, default=None, help="seconds per scenario (default 150 + 0.6 per Job)")
    ch.add_argument("--out", type=Path, default=REPO / "results", help="results directory (default: results/)")
    ch.add_argument("--name", default="chaos", help="base name of the JSON/PNG (default: chaos)")
    ch.add_argument("--jobsets", type=float, default=None, metavar="SHARE",
                    help="the share of each scenario's N that are JobSets, 0-1 (default: 0.2 for jobset-mix, "
                         "0 for the others; JobSet v0.12.0 is built on first use)")
    cmp_ = sub.add_parser("compare", parents=[common],
                          help="jobmirror vs MultiKueue vs the guarantees floor vs the bare-API limit, one run")
    k = cmp_.add_argument_group("compare")
    k.add_argument("--jobs", "--sizes", dest="sizes", type=_sizes, default=DEFAULT_SIZES,
                   help="comma-separated Job counts (default 100,1000; 5000 as e.g. --jobs 100,1000,5000)")
    k.add_argument("--contenders", default=None,
                   help="comma-separated subset of the contenders in bench/compare.py (bare, floor, jobmirror "
                        "and its variants, multikueue, multikueue-equal, multikueue-patched; default: all; "
                        "MultiKueue builds Kueue on first use, 10-20 min, and its patched build once more)")
    k.add_argument("--worker-nodes", type=int, default=4, help="kwok nodes per worker (110 pods each)")
    k.add_argument("--timeout", type=float, default=None, help="seconds per contender and size (default 120 + 1/Job)")
    k.add_argument("--cleanup-timeout", type=float, default=60.0, help="seconds to wait for remote copies to go")
    k.add_argument("--idle-window", type=float, default=5.0,
                   help="seconds of idle API-server traffic measured before each run (subtracted per Job)")
    k.add_argument("--repeats", type=int, default=1,
                   help="runs of every contender per size, in alternating order; the JSON's summary and the table "
                        "give median and spread (min-max) over them (default 1)")
    k.add_argument("--shared-bed", action="store_true",
                   help="one bed per size for every contender, each in its own namespace: faster, for smoke tests "
                        "only (the figures are not comparable)")
    k.add_argument("--profile-cpu", type=float, default=None, metavar="HZ",
                   help="attach py-spy to each contender's Python processes for the measured window, sampling "
                        "at HZ, and write where the CPU went (bench/cpuprofile.py: API calls, watch events, room "
                        "views, the passes' own work ...) into each run's controller.cpuProfile; py-spy costs "
                        "CPU on the same cores, so a profiled run's figures are not the headline ones")
    pc = sub.add_parser("placement", help="placement policies side by side on one unequal bed, beside the lower "
                                          "bound, and the room views' memory (bench/placement.py)")
    pc.add_argument("--jobs", type=int, default=None,
                    help="Jobs per policy (default 300; at least 4); --multitenant: Jobs per order over the three "
                         "tenants (default 240, rounded down to a multiple of 12: 10/12 the burst tenant's)")
    pc.add_argument("--seed", type=int, default=None, help="workload seed (default 21, printed)")
    pc.add_argument("--memory-pods", type=int, default=20000,
                    help="non-terminal pods per worker for the memory part (default 20000; 0 skips it)")
    pc.add_argument("--memory-workers", type=int, default=2, help="workers of the memory part (default 2)")
    pc.add_argument("--memory-settle", type=float, default=5.0,
                    help="seconds between a memory-part controller being synced and its RSS reading (default 5)")
    pc.add_argument("--timeout", type=float, default=None,
                    help="seconds per policy (default 3 x the lower bound + 120)")
    pc.add_argument("--duration-scale", type=float, default=1.0,
                    help="multiply every pod's run time (default 1; the CI smoke runs shorter pods)")
    pc.add_argument("--policies", default=",".join(("RoomAware", "LeastLoaded")),
                    help="comma-separated, in run order (default RoomAware,LeastLoaded)")
    pc.add_argument("--multitenant", action="store_true",
                    help="the multi-tenant workload instead (bench/multitenant.py, issue 35): three tenants, one "
                         "bursting 10x the others, two priorities, once per scheduling.order; no memory part")
    pc.add_argument("--orders", default=",".join(("Arrival", "FairShare")),
                    help="--multitenant: comma-separated scheduling.order values, in run order "
                         "(default Arrival,FairShare)")
    pc.add_argument("--stagger", type=float, default=5.0,
                    help="--multitenant: seconds after the burst the small tenants' first Jobs arrive "
                         "(default 5, times --duration-scale)")
    pc.add_argument("--spread", type=float, default=20.0,
                    help="--multitenant: seconds over which each small tenant's Jobs arrive "
                         "(default 20, times --duration-scale)")
    pc.add_argument("--out", type=Path, default=REPO / "results", help="results directory (default: results/)")
    pc.add_argument("--name", default=None,
                    help="base name of the JSON/PNG (default: placement, or placement-multitenant)")
    fl = sub.add_parser("fleet", help="the real controller against a simulated fleet of fake workers, larger than "
                                      "the bed (bench/fleet.py; a simulation: the API servers are fakes)")
    fl.add_argument("--workers", type=int, default=50, help="simulated workers (default 50)")
    fl.add_argument("--pods-per-worker", type=int, default=20_000,
                    help="running pods on each worker before the controller starts (default 20000)")
    fl.add_argument("--nodes-per-worker", type=int, default=100, help="nodes of each worker (default 100)")
    fl.add_argument("--running", type=int, default=20_000,
                    help="long-running Jobs dispatched before the arrival windows (default 20000)")
    fl.add_argument("--rate", type=float, default=1.16,
                    help="Jobs per second in the steady window (default 1.16: 100,000 a day); the burst window "
                         "runs ten times that")
    fl.add_argument("--window", type=float, default=120.0, help="seconds of each arrival window (default 120)")
    fl.add_argument("--job-seconds", type=float, default=60.0,
                    help="how long an arriving Job runs on its worker (default 60)")
    fl.add_argument("--phase-timeout", type=float, default=1800.0,
                    help="seconds the start, fill and failover phases may each take (default 1800)")
    fl.add_argument("--profile", action="store_true",
                    help="run the first controller under pyinstrument and write profile-fleet*.txt (slower: the "
                         "figures of a profiled run are not the headline ones)")
    fl.add_argument("--report-stalls-over", type=positive_seconds, default=None, metavar="SECONDS",
                    help="the controllers log where their event loop was in every stall longer than this (0.05 "
                         "names the lags behind a phase's loop-lag p99; default: the controller's 1 s); the "
                         "reports go into the JSON's controller.stallReports")
    fl.add_argument("--out", type=Path, default=REPO / "results", help="results directory (default: results/)")
    fl.add_argument("--name", default="fleet", help="base name of the JSON/PNG (default: fleet)")
    vs = sub.add_parser("versions", help="the user journeys on every (manager, worker) Kubernetes release pair "
                                         "(bench/versions.py): results/versions.json + .md")
    vs.add_argument("--managers", default=None,
                    help="comma-separated manager releases (default: every supported one; 1.37 = its patch)")
    vs.add_argument("--workers", default=None, help="comma-separated worker releases (default: every supported one)")
    vs.add_argument("--corners", action="store_true",
                    help="only the corners CI runs (ignores --managers/--workers)")
    vs.add_argument("--journeys", default=None, help="comma-separated subset of the journeys (default: all)")
    vs.add_argument("--parallel", type=int, default=2, help="combinations at once (default 2)")
    vs.add_argument("--journey-timeout", type=float, default=120.0, help="seconds per journey (default 120)")
    vs.add_argument("--replay-seed", type=int, default=None, help="status-replay seed (default 22)")
    vs.add_argument("--replay-examples", type=int, default=None, help="status-replay histories (default 20)")
    vs.add_argument("--out", type=Path, default=REPO / "results", help="results directory (default: results/)")
    vs.add_argument("--name", default="versions", help="base name of the JSON/MD (default: versions)")
    bh = sub.add_parser("behaviour", help="the Job catalogue through jobmirror and MultiKueue, side by side")
    bh.add_argument("--out", type=Path, default=REPO / "results")
    bh.add_argument("--systems", default="jobmirror,multikueue", help="comma-separated: jobmirror,multikueue")
    ab = sub.add_parser("ab", help="commits of jobmirror side by side in alternating 'compare' runs (bench/ab.py)")
    ab.add_argument("--variant", action="append", required=True, metavar="LABEL=REF",
                    help="a git ref to measure, with a label (give two or more; the first is A)")
    ab.add_argument("--order", default="ABBA", help="the runs, one letter per run (default ABBA)")
    ab.add_argument("--jobs", type=int, default=1000, help="Jobs per run (default 1000)")
    ab.add_argument("--out", type=Path, default=REPO / "results")
    ab.add_argument("--name", default="ab", help="base name of the JSON (default: ab)")
    pl = sub.add_parser("plot", help="re-render the PNG of a results JSON")
    pl.add_argument("json", type=Path)
    return p


def _write(result: dict[str, Any], out: Path, name: str) -> tuple[Path, Path]:
    from bench import plot

    out.mkdir(parents=True, exist_ok=True)
    jpath = out / f"{name}.json"
    tmp = jpath.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n")
    os.replace(tmp, jpath)
    png = out / f"{name}.png"
    if result["benchmark"] == "mirror":
        plot.plot_mirror(result, png)
    elif result["benchmark"] == "chaos":
        plot.plot_chaos(result, png)
    elif result["benchmark"] == "compare":
        plot.plot_compare(result, png)
    elif result["benchmark"] == "placement":
        plot.plot_placement(result, png)
    elif result["benchmark"] == "placement-multitenant":
        plot.plot_multitenant(result, png)
    elif result["benchmark"] == "fleet":
        plot.plot_fleet(result, png)
    else:
        plot.plot_builtin(result, png)
    return jpath, png


async def _mirror(args: argparse.Namespace) -> tuple[Path, Path]:
    from bench import mirror_bench
    from bench.env import say

    opts = mirror_bench.MirrorOptions(
        sizes=args.sizes, out=args.out, worker_nodes=args.worker_nodes, pod_duration=args.pod_duration,
        create_concurrency=args.create_concurrency, timeout=args.timeout, qps=args.mirror_qps,
        burst=args.mirror_burst, reconcile_workers=args.reconcile_workers, unclaimed=args.unclaimed,
        profile=args.profile)
    default = ("mirror" + ("" if args.sizes == DEFAULT_SIZES else "-" + "-".join(map(str, args.sizes)))
               + (f"-unclaimed-{args.unclaimed}" if args.unclaimed else "") + ("-profiled" if args.profile else ""))
    name = (f"{args.name}-mirror" if args.cmd == "all" and args.name else args.name) or default
    result = await mirror_bench.run(opts)
    paths = _write(result, args.out, name)
    say(f"wrote {paths[0]} and {paths[1]}")
    return paths


async def _builtin(args: argparse.Namespace) -> tuple[Path, Path]:
    from bench import builtin_bench
    from bench.env import say

    opts = builtin_bench.BuiltinOptions(
        out=args.out, jobs=args.jobs, pods_per_job=args.pods_per_job, indexed_completions=args.indexed_completions,
        indexed_parallelism=args.indexed_parallelism, qps=args.qps, burst=args.burst, syncs=args.syncs,
        nodes=args.nodes, pod_duration=args.pod_duration, create_concurrency=args.create_concurrency,
        timeout=args.builtin_timeout, profile=args.profile)
    default = "builtin-vs-kcm" + ("-profiled" if args.profile else "")
    name = (f"{args.name}-builtin" if args.cmd == "all" and args.name else args.name) or default
    result = await builtin_bench.run(opts)
    paths = _write(result, args.out, name)
    say(f"wrote {paths[0]} and {paths[1]}")
    return paths


async def _chaos(args: argparse.Namespace) -> int:
    """Every scenario (or the chosen ones) on one fresh bed; exit 1 when an invariant broke."""
    import random

    from bench import chaos
    from bench.env import say
    from bench.machine import git_info, load, machine_info, now_iso
    from clusterbed.cluster import ClusterBed, scratch_dir
    from clusterbed.versions import KUBE_VERSION

    unknown = sorted(set(args.scenario or []) - set(chaos.SCENARIOS))
    if unknown:
        say(f"--scenario: unknown {', '.join(unknown)}; known: {', '.join(chaos.SCENARIOS)}")
        return 2
    if args.jobs <= 0:
        say("--jobs must be positive")
        return 2
    if args.jobsets is not None and not 0 <= args.jobsets <= 1:
        say("--jobsets: a share between 0 and 1")
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    say(f"chaos: seed {seed} (repeat with --seed {seed})")
    scenarios = args.scenario or list(chaos.SCENARIOS)
    started = time.monotonic()
    result: dict[str, Any] = {"benchmark": "chaos", "date": now_iso(), "machine": machine_info(), "git": git_info(),
                              "loadAverage": {"start": load()}, "seed": seed, "jobsPerScenario": args.jobs,
                              "timings": chaos.TIMINGS, "kubernetes": {"serverVersion": f"v{KUBE_VERSION}"}}
    bed = ClusterBed(scratch_dir("jobmirror-chaos-"))
    try:
        runs = await chaos.run_all(scenarios, args.jobs, seed, bed.ensure, args.out / "logs" / "chaos",
                                   timeout=args.timeout, jobsets=args.jobsets)
    finally:
        await asyncio.to_thread(bed.down)
    result["loadAverage"]["end"] = load()
    result["seconds"] = round(time.monotonic() - started, 1)
    result["runs"] = chaos.serializable(runs)
    paths = _write(result, args.out, args.name)
    for r in result["runs"]:
        say(chaos.table_row(r))
    say(f"wrote {paths[0]} and {paths[1]}")
    return 0 if all(r.get("ok") for r in result["runs"]) else 1
async def _compare(args: argparse.Namespace) -> tuple[Path, Path]:
    from bench import compare
    from bench.env import say

    opts = compare.CompareOptions(
        sizes=args.sizes, out=args.out, worker_nodes=args.worker_nodes, pod_duration=args.pod_duration,
        create_concurrency=args.create_concurrency, timeout=args.timeout, cleanup_timeout=args.cleanup_timeout,
        idle_window=args.idle_window, shared_bed=args.shared_bed, repeats=args.repeats, profile_cpu=args.profile_cpu)
    if args.contenders:
        opts.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    name = args.name or ("compare" + ("" if args.sizes == DEFAULT_SIZES else "-" + "-".join(map(str, args.sizes))))
    result = await compare.run(opts)
    paths = _write(result, args.out, name)
    print(compare.markdown_table(result))
    say(f"wrote {paths[0]} and {paths[1]}")
    return paths


async def _multitenant(args: argparse.Namespace) -> int:
    """``placement --multitenant``: the same Jobs once per scheduling.order; exit 1 if one failed."""
    from bench import multitenant, placement
    from bench.env import say

    jobs = multitenant.DEFAULT_JOBS if args.jobs is None else args.jobs
    if jobs < 1 or args.stagger < 0 or args.spread < 0:
        say("--jobs must be positive, --stagger and --spread at least 0")
        return 2
    opts = multitenant.MultiTenantOptions(
        out=args.out, jobs=jobs, seed=placement.DEFAULT_SEED if args.seed is None else args.seed,
        timeout=args.timeout, duration_scale=args.duration_scale, stagger=args.stagger, spread=args.spread,
        orders=tuple(o.strip() for o in args.orders.split(",") if o.strip()))
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    result = await multitenant.run(opts)
    result["command"] = "python -m bench " + " ".join(sys.argv[1:])
    paths = _write(result, args.out, args.name or multitenant.BENCHMARK)
    print(multitenant.markdown_table(result))
    say(f"wrote {paths[0]} and {paths[1]}")
    failed = [k for k, r in result["orders"].items() if "error" in r]
    if failed:
        say(f"FAILED: {', '.join(failed)} (see the JSON)")
    return 1 if failed else 0


async def _placement(args: argparse.Namespace) -> int:
    from bench import placement
    from bench.env import say

    if args.multitenant:
        return await _multitenant(args)
    args.jobs = 300 if args.jobs is None else args.jobs
    args.name = args.name or "placement"
    if args.jobs < len(placement.KINDS) or args.memory_pods < 0 or args.memory_workers < 1:
        say(f"--jobs must be at least {len(placement.KINDS)}, --memory-pods at least 0, --memory-workers at least 1")
        return 2
    opts = placement.PlacementOptions(
        out=args.out, jobs=args.jobs, seed=placement.DEFAULT_SEED if args.seed is None else args.seed,
        memory_pods=args.memory_pods, memory_workers=args.memory_workers, timeout=args.timeout,
        duration_scale=args.duration_scale, memory_settle=args.memory_settle,
        policies=tuple(p.strip() for p in args.policies.split(",") if p.strip()))
    # SIGTERM as Ctrl-C: cancelled, the run's finally blocks stop its controllers and delete its clusters
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    result = await placement.run(opts)
    paths = _write(result, args.out, args.name)
    print(placement.markdown_table(result))
    say(f"wrote {paths[0]} and {paths[1]}")
    failed = [k for k, r in result["policies"].items() if "error" in r] + (
        ["memory"] if "error" in (result.get("memory") or {}) else [])
    if failed:
        say(f"FAILED: {', '.join(failed)} (see the JSON)")
    return 1 if failed else 0


async def _fleet(args: argparse.Namespace) -> int:
    """The simulation, its JSON and plot; exit 1 when a phase did not finish."""
    from bench import fleet
    from bench.env import say

    opts = fleet.FleetOptions(out=args.out, workers=args.workers, pods_per_worker=args.pods_per_worker,
                              nodes_per_worker=args.nodes_per_worker, running=args.running, rate=args.rate,
                              window=args.window, job_seconds=args.job_seconds, phase_timeout=args.phase_timeout,
                              profile=args.profile, report_stalls_over=args.report_stalls_over)
    task = asyncio.current_task()
    if task is not None:  # SIGTERM as Ctrl-C: the run's finally stops the controllers and the simulation
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    result = await fleet.run(opts)
    paths = _write(result, args.out, args.name)
    print(fleet.markdown_table(result))
    say(f"wrote {paths[0]} and {paths[1]}")
    return 0 if result.get("error") is None else 1


async def _versions(args: argparse.Namespace) -> int:
    """Every planned combination on fresh clusters; exit 1 when a journey did not pass."""
    import logging
    import shlex

    from bench import versions as vm
    from bench.env import say
    from bench.machine import git_info, machine_info, now_iso
    from clusterbed.build import ensure_binaries
    from clusterbed.cluster import ClusterBed, scratch_dir
    from clusterbed.versions import SUPPORTED_KUBE_VERSIONS

    try:
        managers = vm.parse_versions(args.managers) if args.managers else SUPPORTED_KUBE_VERSIONS
        workers = vm.parse_versions(args.workers) if args.workers else SUPPORTED_KUBE_VERSIONS
    except ValueError as exc:
        say(f"versions: {exc}")
        return 2
    opts = vm.MatrixOptions(parallel=args.parallel, journey_timeout=args.journey_timeout)
    if args.journeys:
        opts.journeys = tuple(j.strip() for j in args.journeys.split(",") if j.strip())
        unknown = sorted(set(opts.journeys) - set(vm.JOURNEYS))
        if unknown or not opts.journeys:
            say(f"versions: --journeys: unknown {', '.join(unknown) or '(none given)'}; "
                f"known: {', '.join(vm.JOURNEYS)}")
            return 2
    if args.replay_seed is not None:
        opts.replay_seed = args.replay_seed
    if args.replay_examples is not None:
        opts.replay_examples = args.replay_examples
    combos = vm.plan(managers, workers, corners=args.corners)
    needed = sorted({v for c in combos for v in (c.manager, c.worker)}, key=vm._version_key)
    say(f"versions: {len(combos)} combinations of {', '.join(needed)}; journeys {', '.join(opts.journeys)}")
    for v in needed:  # a release not built yet is built first (about 8 min each on 2 cores), not mid-run
        await asyncio.to_thread(ensure_binaries, v)
    # The in-process controllers' logs (one per combination; each line names its Job's namespace)
    log_path = args.out / "logs" / f"{args.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for logger in ("mirror", "kruntime"):
        logging.getLogger(logger).addHandler(handler)
        logging.getLogger(logger).setLevel(logging.INFO)
        logging.getLogger(logger).propagate = False
    say(f"versions: controller logs in {log_path}")
    command = "python -m bench " + " ".join(shlex.quote(a) for a in sys.argv[1:] or ["versions"])
    started, date = time.monotonic(), now_iso()
    bed = ClusterBed(scratch_dir("jobmirror-versions-"))
    pool = vm.ClusterPool(bed.ensure, uses=vm.cluster_uses(combos), delete=bed.delete)
    task = asyncio.current_task()
    if task is not None:  # SIGTERM as Ctrl-C: the finally below deletes the clusters
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        with vm.controller_errors() as errors:
            results = await vm.run_matrix(combos, pool, opts, say)
    finally:
        await asyncio.to_thread(bed.down)
    doc = vm.result_document(results, opts, command=command, seconds=time.monotonic() - started, date=date,
                             machine=machine_info(), git=git_info(), errors=errors)
    args.out.mkdir(parents=True, exist_ok=True)
    jpath, mpath = args.out / f"{args.name}.json", args.out / f"{args.name}.md"
    jpath.write_text(json.dumps(doc, indent=1) + "\n")
    md = vm.markdown(doc)
    mpath.write_text(md)
    print(md)
    say(f"wrote {jpath} and {mpath}")
    return 0 if doc["summary"]["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv.insert(0, "all")
    args = parser().parse_args(argv)
    if args.cmd == "plot":
        from bench import plot

        result = json.loads(args.json.read_text())
        png = args.json.with_suffix(".png")
        {"mirror": plot.plot_mirror, "chaos": plot.plot_chaos, "compare": plot.plot_compare,
         "placement": plot.plot_placement, "placement-multitenant": plot.plot_multitenant,
         "fleet": plot.plot_fleet}.get(
            result["benchmark"], plot.plot_builtin)(result, png)
        print(png)
        return 0
    if args.cmd == "ab":
        from bench import ab

        variants = []
        for v in args.variant:
            label, sep, ref = v.partition("=")
            if not sep or not label or not ref:
                raise SystemExit(f"--variant wants LABEL=REF, got {v!r}")
            variants.append((label, ref))
        ab.main(variants, args.order, args.jobs, args.out, args.name)
        return 0
    if args.cmd == "behaviour":
        from bench import behaviour

        behaviour.main(args.out, [s.strip() for s in args.systems.split(",") if s.strip()])
        return 0
    started = time.monotonic()
    if args.cmd == "chaos":
        return asyncio.run(_chaos(args))
    if args.cmd == "versions":
        try:
            return asyncio.run(_versions(args))
        except (asyncio.CancelledError, KeyboardInterrupt):
            from bench.env import say

            say("versions: interrupted; its controllers were stopped and its clusters deleted")
            return 130
    if args.cmd == "fleet":
        from bench.env import say

        try:
            rc = asyncio.run(_fleet(args))
        except (asyncio.CancelledError, KeyboardInterrupt):
            say("fleet: interrupted; its controllers and the simulation were stopped")
            return 130
        say(f"done in {time.monotonic() - started:.0f}s")
        return rc
    if args.cmd == "placement":
        from bench.env import say

        try:
            rc = asyncio.run(_placement(args))
        except (asyncio.CancelledError, KeyboardInterrupt):
            say("placement: interrupted; its controllers were stopped and its clusters deleted")
            return 130

        say(f"done in {time.monotonic() - started:.0f}s")
        return rc
    if args.cmd in ("all", "mirror"):
        asyncio.run(_mirror(args))
    if args.cmd in ("all", "builtin"):
        asyncio.run(_builtin(args))
    if args.cmd == "compare":
        asyncio.run(_compare(args))
    from bench.env import say

    say(f"done in {time.monotonic() - started:.0f}s")
    return 0
