"""The controller's configuration: a YAML file, overridden by ``JOBMIRROR_*`` environment variables.

YAML keys are camelCase (``workerLostTimeout``), environment variables the snake_case
field name (``JOBMIRROR_WORKER_LOST_TIMEOUT``; nested: ``JOBMIRROR_LEADER_ELECTION__ENABLED``).
Every error names the offending field and file, so ``check-config`` output is actionable.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Mapping
from enum import StrEnum
from math import ceil
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from mirror.claim import ClaimRule
from mirror.naming import BUILTIN_CONTROLLER_NAME, DEFAULT_CONTROLLER_NAME, default_origin

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_yaml_data: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("yaml_data")


class ConfigError(ValueError):
    """The configuration is unusable; ``str()`` lists each bad field with the reason."""


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Worker(_Model):
    name: str = Field(description="The worker's name (a DNS label): in events, the `worker` label of metrics and "
                      "the placement annotation `jobmirror.dev/cluster`.")
    kubeconfig: Path = Field(description="Kubeconfig of the worker cluster (a relative path is relative to the "
                             "config file).")
    context: str | None = Field(None, description="Context in that kubeconfig; unset = its current-context.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels a Job's "
                                   "`jobmirror.dev/worker-selector` annotation is matched against.")
    # High defaults: MultiKueue's 5/10 made 1000 Jobs take minutes.
    qps: float = Field(200.0, description="Requests per second of the client to this worker.")
    burst: int = Field(400, description="Burst of the client to this worker.")

    @field_validator("name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        if not _DNS_LABEL.match(v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a DNS label (lowercase letters, digits, '-', ≤ 63 chars)")
        return v


class PlacementPolicy(StrEnum):
    #: the default: LeastLoaded among the workers where the Job's pod could ever run and has room
    #: now (mirror/room/); watches each worker's Nodes and non-terminal Pods
    ROOM_AWARE = "RoomAware"
    #: fewest unfinished copies, room unseen (no node/pod watches on the workers)
    LEAST_LOADED = "LeastLoaded"
    ROUND_ROBIN = "RoundRobin"


class MissingNamespace(StrEnum):
    CREATE = "Create"
    REPORT = "Report"


class InspectTLS(_Model):
    """A mounted serving certificate for the inspect API (unset: one is generated at start)."""

    cert_file: Path = Field(description="PEM certificate (chain) the inspect API serves.")
    key_file: Path = Field(description="Its PEM private key.")


class LeaderElection(_Model):
    enabled: bool = Field(default=False, description="Elect a leader through a Lease (run 2 replicas with it); "
                          "only the leader reconciles.")
    namespace: str = Field(default="jobmirror-system", description="Namespace of the Lease in the manager cluster.")
    lease_name: str = Field(default="jobmirror-controller", description="Name of the Lease.")
    # Whole seconds of at least 1: leaseDurationSeconds is an integer on the Lease.
    lease_duration: Annotated[int, Field(ge=1)] = Field(default=20, description=(
        "Seconds a standby waits after it last saw the Lease change before it takes it; at least "
        "renewDeadline + requestTimeout, so a write sent just before a lost renewal has landed before a "
        "standby leads."))
    renew_deadline: Annotated[int, Field(ge=1)] = Field(default=10, description=(
        "Seconds a leader may go without a successful renewal; then it stops leading and exits."))
    retry_period: Annotated[int, Field(ge=1)] = Field(default=2, description=(
        "Seconds between Lease renewals and attempts."))

    @model_validator(mode="after")
    def _timings(self) -> LeaderElection:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= 1.2 * self.retry_period:
            raise ValueError("renewDeadline must be greater than 1.2 x retryPeriod")
        return self


class _YamlSource(PydanticBaseSettingsSource):
    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_yaml_data.get({}))


def _keyed_by_alias(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """Rename field-name keys (``worker_lost_timeout``) to their camelCase alias, nested models too."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        f = model.model_fields.get(key)
        if f is None:
            out[key] = value
            continue
        sub = f.annotation
        if isinstance(value, dict) and isinstance(sub, type) and issubclass(sub, BaseModel):
            value = _keyed_by_alias(sub, value)
        out[f.alias or key] = value
    return out


class _ByAlias(PydanticBaseSettingsSource):
    """One source's values keyed like the YAML file, so sources merge field by field.

    The environment source keys by field name and the file by alias; unmerged, one
    field would arrive under both keys and ``extra="forbid"`` would reject the override.
    """

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._inner = inner

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return _keyed_by_alias(self.settings_cls, self._inner())


class Config(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="JOBMIRROR_",
        env_nested_delimiter="__",
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
    )

    workers: list[Worker] = Field(description="The worker clusters Jobs are mirrored to: at least one, names unique.")
    manager_kubeconfig: Path | None = Field(None, description="Kubeconfig of the manager cluster; unset = the "
                                            "in-cluster ServiceAccount.")
    manager_context: str | None = Field(None, description="Context in the manager kubeconfig; unset = its "
                                        "current-context.")
    controller_name: str = Field(DEFAULT_CONTROLLER_NAME, description="The `spec.managedBy` value whose Jobs this "
                                 "installation claims (a domain-prefixed path; never the built-in Job controller's).")
    origin: str | None = Field(None, description=(
        "Identifies this installation on the copies it makes, so several managers can share a worker; unset = "
        "`jobmirror-<kube-system namespace UID of the manager>`. Several installations on one manager cluster "
        "need distinct origins."))
    namespaces: list[str] = Field(default_factory=list, description="Allow-list of manager namespaces whose Jobs "
                                  "are claimed; empty = all namespaces.")
    resync_period: float = Field(30.0, gt=0, description="Seconds between two looks at every claimed Job "
                                 "(status is also mirrored on every worker watch event).")
    status_batch_period: float = Field(1.0, ge=0, le=30, description=(
        "Seconds a copy's running counters (active, ready, succeeded …) may wait before they are mirrored, so "
        "the changes of that while go to the manager in one write; a condition (Complete, Failed, "
        "SuccessCriteriaMet, Suspended …) is mirrored at once. 0 = every change at once. The built-in Job "
        "controller batches its pods' updates the same way (1 s)."))
    worker_lost_timeout: float = Field(900.0, gt=0, description=(
        "Seconds a worker may be unreachable (or unconfigured) before its Jobs are re-dispatched (or, if already "
        "decided, finished) and deleted Jobs waiting on it release their finalizer."))
    gc_interval: float = Field(60.0, gt=0, description="Seconds between GC rounds, which delete copies of this "
                               "origin whose manager Job is gone or placed elsewhere.")
    placement: PlacementPolicy = Field(PlacementPolicy.ROOM_AWARE, description=(
        "How a worker is chosen: RoomAware (where the Job's pods fit now, watching each worker's Nodes and "
        "Pods; then the least loaded), LeastLoaded (fewest unfinished copies, room unseen) or RoundRobin."))
    keep_finished_remote: bool = Field(False, description="Keep a finished Job's copy on its worker instead of "
                                       "deleting it (and its pods).")
    missing_namespace: MissingNamespace = Field(MissingNamespace.CREATE, description=(
        "The Job's namespace is missing on the worker: Create it (with the manager namespace's Pod Security "
        "labels), or Report it as a NamespaceMissing event."))
    worker_namespaces: list[str] = Field(default_factory=list, description=(
        "Namespaces (names or shell patterns, `team-*`) the controller may create or use on workers; a claimed "
        "Job elsewhere gets no copy (event NamespaceNotAllowed). Empty = any, except the clusters' own `default` "
        "and `kube-*`, used only when an entry names them (`default`, `kube-system`, `kube-*`; `*` does not). An "
        "existing worker namespace gets a copy only if it enforces at least the manager namespace's Pod Security "
        "level (event NamespaceWeaker)."))
    namespace_labels: list[str] = Field(default_factory=list, description=(
        "Label keys (or patterns) copied from the manager namespace to a worker namespace the controller "
        "creates, beside Pod Security's, which always are."))
    created_namespace_labels: dict[str, str] = Field(
        default_factory=lambda: {"pod-security.kubernetes.io/enforce": "baseline"}, description=(
            "Labels of a created worker namespace where the manager namespace has none of that key: no "
            "unlabelled (privileged) namespace by default. `{}` restores the bare namespace."))
    qps: float = Field(200.0, description="Requests per second of the client to the manager cluster.")
    burst: int = Field(400, description="Burst of the client to the manager cluster.")
    request_timeout: float = Field(10.0, gt=0, description="Seconds any one API request may take.")
    health_probe_interval: float = Field(5.0, gt=0, description="Seconds between two `/readyz` probes of each "
                                         "worker.")
    slow_call_seconds: float = Field(3.0, gt=0, description=(
        "A worker call (or probe) slower than this makes the worker slow for a minute: new Jobs go elsewhere "
        "when they can, and its calls share a quarter of the reconcile slots with the other slow workers'."))
    workers_concurrency: int = Field(32, ge=1, description="Reconcile slots: manager Jobs reconciled at once.")
    metrics_address: str = Field(":8080", description="host:port serving `/healthz`, `/readyz` and `/metrics`.")
    worker_events: bool = Field(True, description=(
        "Mirror the Warning events of copies and their pods onto the manager Jobs (needs events list/watch and "
        "pods get in the workers, see deploy/worker/)."))
    unschedulable_timeout: float = Field(300.0, gt=0, description=(
        "Seconds a copy's pod may stay unschedulable before a CopyUnschedulable event (and, with RoomAware, "
        "an unpinned copy that never started is moved)."))
    head_of_line_hold: float = Field(120.0, ge=0, description=(
        "RoomAware: seconds a Job waiting for room may hold the workers it waits for against Jobs created "
        "after it (first come, first placed), counted from when the first of the two began waiting; then "
        "it stops holding (a HeadOfLineHoldEnded event) and keeps waiting. 0: no Job holds a worker."))
    inspect_address: str = Field("", description=(
        "host:port of the read-only HTTPS inspect API behind `kubectl jobmirror describe/logs` for users "
        "without worker credentials (TokenReview, then a SubjectAccessReview on the Job); empty = off."))
    inspect_tls: InspectTLS | None = Field(None, description=(
        "A mounted serving certificate for the inspect API; unset = a self-signed one is made at start (the "
        "service proxy does not verify it: encryption is what the hop needs)."))
    inspect_max_streams: int = Field(32, ge=1, description=(
        "Open `logs` streams at once in total; past it a user gets 429, so no user can take the connections "
        "the controller's own reads need."))
    inspect_max_streams_per_user: int = Field(4, ge=1, description="Open `logs` streams at once per user.")
    inspect_write_timeout: float = Field(30.0, gt=0, description=(
        "Seconds a log stream's reader may take to accept a chunk before the stream is cut."))
    leader_election: LeaderElection = Field(default_factory=LeaderElection, description=(
        "Lease-based leader election (enable it with 2 replicas)."))

    @field_validator("controller_name")
    @classmethod
    def _not_builtin(cls, v: str) -> str:
        if v == BUILTIN_CONTROLLER_NAME:
            raise ValueError(f"{v!r} is reserved for the built-in Job controller")
        if "/" not in v:
            raise ValueError("must be a domain-prefixed path, e.g. jobmirror.dev/controller")
        return v

    @field_validator("inspect_address")
    @classmethod
    def _address(cls, v: str) -> str:
        _, sep, port = v.rpartition(":")
        if v and not (sep and port.isdigit() and int(port) < 65536):
            raise ValueError(f"{v!r} is not host:port (e.g. ':8081'; empty = off)")
        return v

    @field_validator("origin")
    @classmethod
    def _origin_label(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a valid label value")
        return v

    @field_validator("leader_election")
    @classmethod
    def _lease_outlasts_writes(cls, v: LeaderElection, info: ValidationInfo) -> LeaderElection:
        timeout = info.data.get("request_timeout")
        if v.enabled and timeout is not None and v.lease_duration - v.renew_deadline < timeout:
            raise ValueError(
                f"leaseDuration ({v.lease_duration}s) - renewDeadline ({v.renew_deadline}s) must be at least "
                f"requestTimeout ({timeout:g}s): a write sent just before a failed renewal may land that much "
                f"later, after a standby took over; raise leaseDuration to {v.renew_deadline + ceil(timeout)} "
                "or lower requestTimeout")
        return v

    @field_validator("workers")
    @classmethod
    def _unique_workers(cls, v: list[Worker]) -> list[Worker]:
        # A field validator, so the error is reported at ``workers``, not at the top level.
        if not v:
            raise ValueError("at least one worker is required")
        names = [w.name for w in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate worker names: {', '.join(dupes)}")
        return v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment beats the file; explicit keyword arguments beat both.
        return tuple(_ByAlias(settings_cls, s) for s in (init_settings, env_settings, _YamlSource(settings_cls)))

    def origin_for(self, manager_cluster: str) -> str:
        """The origin label value: the configured one, else derived from the manager's identity."""
        return self.origin or default_origin(manager_cluster)

    @property
    def claim_rule(self) -> ClaimRule:
        return ClaimRule(self.controller_name, frozenset(self.namespaces))

    def worker(self, name: str) -> Worker | None:
        return next((w for w in self.workers if w.name == name), None)


def _format_errors(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: invalid configuration:"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"  {loc}: {err['msg']}")
    return "\n".join(lines)


def load_config(path: str | Path) -> Config:
    """Read, validate and resolve a config file (relative kubeconfig paths are file-relative)."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: top level must be a mapping, got {type(raw).__name__}")
    token = _yaml_data.set(raw)
    try:
        cfg = Config()  # type: ignore[call-arg]
    except ValidationError as exc:
        raise ConfigError(_format_errors(p, exc)) from exc
    finally:
        _yaml_data.reset(token)
    base = p.resolve().parent
    for w in cfg.workers:
        if not w.kubeconfig.is_absolute():
            w.kubeconfig = base / w.kubeconfig
    if cfg.manager_kubeconfig is not None and not cfg.manager_kubeconfig.is_absolute():
        cfg.manager_kubeconfig = base / cfg.manager_kubeconfig
    return cfg


def cluster_conflicts(manager: str, workers: Mapping[str, str | None], *, origin: str | None) -> list[str]:
    """Problems in the worker list that only the clusters' identities reveal; empty when fine.

    ``workers`` maps each entry to its cluster identity (kube-system namespace UID; None when
    it could not be read). Two entries for one cluster would count, place and garbage-collect
    the same copies twice (each sees the other's copy as stray), so they are an error naming
    both. So is a configured ``origin`` that is another cluster's default origin: the copies
    of a jobmirror managing from that cluster would be indistinguishable from ours. A worker
    that is the manager cluster itself is fine (role sharing: copies get derived names).
    """
    problems: list[str] = []
    by_cluster: dict[str, list[str]] = {}
    for name, ident in workers.items():
        if ident:
            by_cluster.setdefault(ident, []).append(name)
    for ident, names in by_cluster.items():
        if len(names) > 1:
            also = " (the manager cluster itself)" if ident == manager else ""
            problems.append(f"workers: entries {' and '.join(repr(n) for n in names)} are the same cluster{also} "
                            f"(kube-system namespace UID {ident}); list each cluster once")
    if origin:
        for name, ident in workers.items():
            if ident and ident != manager and origin == default_origin(ident):
                problems.append(f"origin: {origin!r} is the default origin of worker {name!r}'s cluster, i.e. of "
                                "a jobmirror managing from there; its copies and ours would be indistinguishable")
    return problems
