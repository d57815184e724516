"""The demo: a manager and two workers, sample Jobs mirrored and completed, then what a user reads about one.

worker-1 runs Jobs with kube-controller-manager's Job controller; worker-2 has that
controller disabled and runs jobmirror's builtin controller instead. Both have kwok
fake nodes so pods really get scheduled, run and finish. Everything started here is
stopped again (by PID) on exit, also on Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterbed.cluster import ClusterBed, ClusterSpec, LocalCluster

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

JOBS = {
    "hello": {"completions": 3, "parallelism": 2},
    "indexed": {"completions": 4, "parallelism": 4, "completionMode": "Indexed",
                "successPolicy": {"rules": [{"succeededIndexes": "0-1"}]}},
    "doomed": {"backoffLimit": 1, "fail": True},
    "later": {"suspend": True},
    "on-builtin": {"completions": 2, "pin": "worker-2"},
}


def say(msg: str) -> None:
    print(f"\n==> {msg}", flush=True)


def job_manifest(name: str, opts: dict) -> str:  # type: ignore[type-arg]
    spec: dict = {  # type: ignore[type-arg]
        "managedBy": "jobmirror.dev/controller",
        "completions": opts.get("completions", 1),
        "parallelism": opts.get("parallelism", 1),
        "backoffLimit": opts.get("backoffLimit", 3),
        "template": {
            "metadata": {
                "labels": {"jobmirror.dev/kwok-outcome": "fail"} if opts.get("fail") else {},
                "annotations": {"jobmirror.dev/kwok-duration": "2s"},
            },
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
        },
    }
    for k in ("completionMode", "successPolicy", "suspend"):
        if k in opts:
            spec[k] = opts[k]
    md: dict = {"name": name, "namespace": "demo"}  # type: ignore[type-arg]
    if "pin" in opts:
        md["annotations"] = {"jobmirror.dev/pin-cluster": opts["pin"]}
    return json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": md, "spec": spec})


def finished(manager: LocalCluster) -> tuple[int, int]:
    out = manager.kubectl("get", "jobs", "-n", "demo", "-o", "json").stdout
    items = json.loads(out)["items"]
    done = sum(1 for j in items for c in j.get("status", {}).get("conditions") or []
               if c["type"] in ("Complete", "Failed") and c["status"] == "True")
    return done, len(items)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="jobmirror-demo-"))
    bed = ClusterBed(work / "bed")
    procs: list[subprocess.Popen[bytes]] = []

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        say("starting three local clusters (real kube-apiserver/etcd/kube-controller-manager, kwok nodes)")
        manager = bed.create(ClusterSpec("manager", nodes=0))
        w1 = bed.create(ClusterSpec("worker-1", nodes=2))
        w2 = bed.create(ClusterSpec("worker-2", job_controller=False, nodes=2))

        say("starting jobmirror's builtin Job controller for worker-2 (its kcm Job controller is off)")
        builtin_log = open(work / "builtin-controller.log", "wb")  # noqa: SIM115
        procs.append(subprocess.Popen([PY, "-m", "builtin_controller.cli", "--kubeconfig", str(w2.kubeconfig),
                                       "--metrics-address", "127.0.0.1:0"], stdout=builtin_log,
                                      stderr=subprocess.STDOUT, cwd=ROOT))

        config = work / "jobmirror.yaml"
        config.write_text(
            f"managerKubeconfig: {manager.kubeconfig}\n"
            "workers:\n"
            f"  - {{name: worker-1, kubeconfig: {w1.kubeconfig}}}\n"
            f"  - {{name: worker-2, kubeconfig: {w2.kubeconfig}}}\n"
            "metricsAddress: 127.0.0.1:0\nresyncPeriod: 10\n"
        )
        say(f"checking the config: jobmirror check-config {config}")
        subprocess.run([PY, "-m", "mirror.cli", "check-config", str(config)], check=True, cwd=ROOT)

        say("starting the jobmirror controller")
        mirror_log = open(work / "jobmirror.log", "wb")  # noqa: SIM115
        procs.append(subprocess.Popen([PY, "-m", "mirror.cli", "--log-format", "text", "run", "--config",
                                       str(config)], stdout=mirror_log, stderr=subprocess.STDOUT, cwd=ROOT))

        say("submitting sample Jobs to the MANAGER (spec.managedBy: jobmirror.dev/controller)")
        manager.kubectl("create", "namespace", "demo")
        for name, opts in JOBS.items():
            r = manager.kubectl("apply", "-f", "-", input=job_manifest(name, opts))
            print("  " + r.stdout.strip())

        status_cmd = [PY, "-m", "mirror.cli", "status", "--config", str(config)]
        deadline = time.monotonic() + 180
        resumed = False
        while time.monotonic() < deadline:
            time.sleep(4)
            if not resumed:
                say("resuming the suspended Job 'later' (it had no remote copy until now)")
                manager.kubectl("patch", "job", "later", "-n", "demo", "--type=merge", "-p",
                                '{"spec":{"suspend":false}}')
                resumed = True
            done, total = finished(manager)
            print(f"  {done}/{total} Jobs finished on the manager", flush=True)
            if done == total:
                break
        say("jobmirror status")
        subprocess.run(status_cmd, cwd=ROOT)
        say("the manager's own view: kubectl get jobs -n demo (on the manager cluster)")
        print(manager.kubectl("get", "jobs", "-n", "demo", "-o", "wide").stdout)
        say("where the manager Job 'hello' ran and why: its jobmirror.dev/ annotations (no Event on the normal path)")
        hello = json.loads(manager.kubectl("get", "job", "hello", "-n", "demo", "-o", "json").stdout)
        for key, value in sorted((hello["metadata"].get("annotations") or {}).items()):
            if key.startswith("jobmirror.dev/"):
                print(f"  {key}: {value}")
        say("kubectl jobmirror describe hello -n demo --config ... (placement, the copy, its pods, side by side)")
        subprocess.run([PY, "-m", "mirror.cli", "describe", "hello", "-n", "demo", "--config", str(config)], cwd=ROOT)
        done, total = finished(manager)
        if done != total:
            print(f"demo FAILED: only {done}/{total} Jobs finished; logs in {work}", file=sys.stderr)
            return 1
        say(f"demo complete: {total} Jobs mirrored to worker-1 (kcm) and worker-2 (builtin controller) "
            f"and finished on the manager. Logs: {work}")
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        say("tearing the clusters down")
        bed.down()
        if os.environ.get("JOBMIRROR_KEEP_DEMO") != "1":
            print(f"(logs kept in {work})")


if __name__ == "__main__":
    sys.exit(main())
