"""A Docker engine for the kind tier: use the one that answers, or install and start Debian's.

A laptop with Docker Desktop (or any engine that answers ``docker info``) is used as it
is and never reconfigured. Only when nothing answers do we install ``docker.io`` from the
distribution's own packages and start ``dockerd`` ourselves, recording its PID so that
:func:`stop_engine` stops exactly that process and nothing else.

One quirk of some hosts (containers, CI sandboxes): the process capability bounding set
lacks CAP_SYS_RESOURCE, while ``docker run --privileged`` (which kind uses for its nodes)
asks for every capability, so runc fails with "unable to apply caps". There, and only
there, the engine we start gets a small runc wrapper as its default runtime that drops
that one capability from each container's spec.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from clusterbed import versions

CAP_SYS_RESOURCE = 24
WRAPPER_RUNTIME = "runc-nosysres"
#: Host packages the kind tier needs besides the engine (the wrapper uses jq; images use debootstrap).
HOST_PACKAGES = {"jq": "jq", "debootstrap": "debootstrap"}

# The runtime wrapper: removes CAP_SYS_RESOURCE from the OCI spec of `create`/`run` (the bundle's
# config.json) and from the process file of `exec` (kind uses `docker exec --privileged`), then
# hands over to the real runc.
_WRAPPER = r"""#!/bin/sh
# Installed by jobmirror (kindbed/engine.py) because this host's capability bounding set
# lacks CAP_SYS_RESOURCE: drop it from privileged containers, then run the real runc.
REAL=@REAL_RUNC@; bundle=.; proc=; cmd=; prev=
for a in "$@"; do
  case "$prev" in --bundle|-b) bundle="$a";; --process|-p) proc="$a";; esac
  case "$a" in --bundle=*) bundle="${a#--bundle=}";; --process=*) proc="${a#--process=}";;
    create|run|exec) [ -z "$cmd" ] && cmd="$a";; esac
  prev="$a"
done
F='if getpath($p) then setpath($p; getpath($p) | with_entries(.value |=
  (if type=="array" then map(select(. != "CAP_SYS_RESOURCE")) else . end))) else . end'
strip() { [ -f "$1" ] || return 0; t="$1.tmp.$$"
  if @JQ@ -c --argjson p "$2" "$F" "$1" > "$t"; then mv "$t" "$1"; else rm -f "$t"; fi; }
case "$cmd" in create|run) strip "$bundle/config.json" '["process","capabilities"]' ;;
  exec) [ -n "$proc" ] && strip "$proc" '["capabilities"]' ;; esac
exec "$REAL" "$@"
"""


class EngineError(RuntimeError):
    """No engine could be found or started; the message says which step failed and why."""


@dataclass(frozen=True)
class Engine:
    """The engine in use. ``started_pid`` is set only when we started dockerd ourselves."""

    server_version: str
    started_pid: int | None = None
    runtime_wrapper: bool = False


def _log(msg: str) -> None:
    print(f"[kind engine] {msg}", file=sys.stderr, flush=True)


def state_dir() -> Path:
    return versions.cache_root() / "engine"


def _pidfile() -> Path:
    return state_dir() / "dockerd.pid"


def server_version(timeout: float = 15) -> str | None:
    """The answering engine's version, or None when ``docker info`` gets no answer."""
    if shutil.which("docker") is None:
        return None
    try:
        proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and out and "<no value>" not in out else None


def bounding_set_lacks(cap: int, status: Path = Path("/proc/self/status")) -> bool:
    """True when the process capability bounding set does not contain ``cap``."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapBnd:"):
                return not (int(line.split()[1], 16) >> cap) & 1
    except (OSError, ValueError):
        pass
    return False


def _privileged_prefix() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo"):
        return ["sudo", "-n"]
    raise EngineError("installing packages and starting dockerd needs root (or passwordless sudo); "
                      "start a Docker engine yourself, then re-run")


def ensure_host_packages(names: dict[str, str] | None = None) -> None:
    """Install the Debian packages whose command is missing (``apt-get``; nothing else is supported)."""
    wanted = names if names is not None else HOST_PACKAGES
    missing = sorted({pkg for cmd, pkg in wanted.items() if shutil.which(cmd) is None})
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise EngineError(f"missing {', '.join(missing)} and no apt-get here to install them: install them and re-run")
    prefix = _privileged_prefix()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _log(f"installing Debian packages: {' '.join(missing)}")
    t0 = time.monotonic()
    for attempt in (1, 2):
        proc = subprocess.run([*prefix, "apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
                              capture_output=True, text=True, env=env)
        if proc.returncode == 0:
            break
        if attempt == 1:  # stale package lists are the usual cause: refresh once, then retry
            _log("apt-get install failed; running apt-get update and retrying once")
            subprocess.run([*prefix, "apt-get", "update", "-q"], capture_output=True, text=True, env=env)
            continue
        raise EngineError(f"apt-get install {' '.join(missing)} failed (exit {proc.returncode}):\n"
                          f"{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    _log(f"installed {' '.join(missing)} in {time.monotonic() - t0:.0f}s")


def _install_wrapper() -> Path:
    real = shutil.which("runc") or "/usr/sbin/runc"
    jq = shutil.which("jq")
    if jq is None:
        raise EngineError("the runc wrapper needs jq, which is not installed")
    path = state_dir() / WRAPPER_RUNTIME
    text = _WRAPPER.replace("@REAL_RUNC@", real).replace("@JQ@", jq)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        path.chmod(0o755)
    return path


def _read_pid() -> int | None:
    try:
        pid = int(_pidfile().read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return pid if b"dockerd" in cmdline.split(b"\0")[0] else None


def ensure_engine(timeout: float = 90) -> Engine:
    """Return the answering engine; install and start Debian's dockerd only when none answers."""
    version = server_version()
    if version is not None:
        pid = _read_pid()
        _log(f"Docker engine {version} answers{' (started by us earlier)' if pid else ''}: using it as it is")
        return Engine(version, started_pid=pid)
    if sys.platform != "linux":
        raise EngineError("no Docker engine answers `docker info`: start Docker Desktop (or another engine) and re-run")
    ensure_host_packages({**HOST_PACKAGES, "dockerd": "docker.io"})
    state_dir().mkdir(parents=True, exist_ok=True)
    args = ["dockerd", "--pidfile", str(state_dir() / "dockerd.internal.pid")]
    wrapper = bounding_set_lacks(CAP_SYS_RESOURCE)
    if wrapper:
        path = _install_wrapper()
        _log(f"capability bounding set lacks CAP_SYS_RESOURCE: default runtime {WRAPPER_RUNTIME} ({path})")
        args += ["--add-runtime", f"{WRAPPER_RUNTIME}={path}", "--default-runtime", WRAPPER_RUNTIME]
    log_path = state_dir() / "dockerd.log"
    _log(f"starting {' '.join(args)} (log {log_path})")
    with log_path.open("ab") as log:
        proc = subprocess.Popen([*_privileged_prefix(), *args], stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    _pidfile().write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while (version := server_version(timeout=5)) is None:
        if proc.poll() is not None:
            raise EngineError(f"dockerd exited with {proc.returncode}:\n{_tail(log_path)}")
        if time.monotonic() > deadline:
            raise EngineError(f"dockerd did not answer within {timeout:.0f}s:\n{_tail(log_path)}")
        time.sleep(0.5)
    _log(f"Docker engine {version} started (pid {proc.pid})")
    return Engine(version, started_pid=proc.pid, runtime_wrapper=wrapper)


def stop_engine(timeout: float = 30) -> bool:
    """Stop the dockerd we started (by its recorded PID); any other engine is left alone."""
    pid = _read_pid()
    if pid is None:
        _pidfile().unlink(missing_ok=True)
        return False
    _log(f"stopping the dockerd we started (pid {pid})")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            _log(f"dockerd {pid} still running after {timeout:.0f}s: SIGKILL")
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        with contextlib.suppress(ChildProcessError):  # reap it if it is our own child
            os.waitpid(pid, os.WNOHANG)
    _pidfile().unlink(missing_ok=True)
    return True


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no {path})"


def describe(engine: Engine) -> str:
    return json.dumps({"server": engine.server_version, "startedPid": engine.started_pid,
                       "runtimeWrapper": engine.runtime_wrapper})
