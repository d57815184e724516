"""Per-tenant worker access: which manager namespaces may place Jobs on which workers.

Each worker's ``access`` (mirror.config.WorkerAccess) lists the namespaces that may use it, by
name, shell pattern or a label selector on the manager namespace; a worker without one is open
to every namespace (the default, as before). The rule is applied before placement sees the
workers, so a pin, a worker-selector and the policy's own choice all stay within it, and a Job
waiting for room never holds a worker its namespace may not use.

Pure: the namespace's labels come from the caller (a manager Namespace cache, or None when not
known yet — then only the names and patterns can admit it: unknown labels never open a worker).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from fnmatch import fnmatchcase

from mirror.config import LabelSelector, SelectorOperator, WorkerAccess
from mirror.naming import ANNOTATION_PIN, ANNOTATION_WORKER_SELECTOR
from mirror.placement import NoWorker

Access = Mapping[str, WorkerAccess | None]


class WorkerNotAllowed(NoWorker):
    """The Job's namespace may not use the worker(s) its pin or worker-selector names; the message
    names the rule (written as a NoWorker Warning: the remedy is the same, fix the annotation)."""


def selects(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics: every matchLabels pair and every expression holds."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for r in selector.match_expressions:
        have = labels.get(r.key)
        if r.operator is SelectorOperator.IN and have not in r.values:
            return False
        if r.operator is SelectorOperator.NOT_IN and have is not None and have in r.values:
            return False
        if r.operator is SelectorOperator.EXISTS and have is None:
            return False
        if r.operator is SelectorOperator.DOES_NOT_EXIST and have is not None:
            return False
    return True


def may_use(namespace: str, labels: Mapping[str, str] | None, rule: WorkerAccess | None) -> bool:
    """Whether ``namespace`` may use a worker with access ``rule`` (None: open to all)."""
    if rule is None:
        return True
    if any(fnmatchcase(namespace, pattern) for pattern in rule.namespaces):
        return True
    return rule.namespace_selector is not None and labels is not None and selects(rule.namespace_selector, labels)


def allowed_workers(namespace: str, labels: Mapping[str, str] | None, access: Access) -> set[str]:
    """The workers (of ``access``: every configured one) whose Jobs ``namespace`` may place."""
    return {worker for worker, rule in access.items() if may_use(namespace, labels, rule)}


def describe_rule(rule: WorkerAccess | None) -> str:
    """The rule in the words of the config, for an event (``namespaces [a, b-*] or namespaceSelector …``)."""
    if rule is None:
        return "every namespace"
    parts = []
    if rule.namespaces:
        parts.append(f"namespaces [{', '.join(rule.namespaces)}]")
    if rule.namespace_selector is not None:
        sel = rule.namespace_selector
        terms = [f"{k}={v}" for k, v in sel.match_labels.items()]
        terms += [f"{r.key} {r.operator.value}" + (f" ({', '.join(r.values)})" if r.values else "")
                  for r in sel.match_expressions]
        parts.append(f"namespaceSelector {{{', '.join(terms)}}}")
    return " or ".join(parts)


def refusal(namespace: str, labels: Mapping[str, str] | None, access: Access, *, pin: str | None = None,
            selected: Collection[str] | None = None) -> str | None:
    """Why the Job of ``namespace`` cannot be placed within its access, or None when it can.

    ``pin`` is its pinned worker; ``selected`` the workers its worker-selector matches (None: no
    selector). A pin to a worker that is not configured is not refused here: placement says so.
    """
    allowed = allowed_workers(namespace, labels, access)
    unknown = labels is None and any(r is not None and r.namespace_selector is not None for r in access.values())
    later = f" (the labels of namespace {namespace} are not known yet)" if unknown else ""
    if pin:
        if pin in access and pin not in allowed:
            return (f"worker access: namespace {namespace} may not use worker {pin!r} named by {ANNOTATION_PIN}: "
                    f"workers[{pin}].access admits only {describe_rule(access[pin])}{later}")
        return None
    wanted = set(access) if selected is None else set(selected)
    if not wanted or wanted & allowed:
        return None  # nothing selected at all is placement's to say (no configured worker matches)
    rules = "; ".join(f"workers[{w}].access admits only {describe_rule(access[w])}" for w in sorted(wanted))
    if selected is not None:
        return (f"worker access: {ANNOTATION_WORKER_SELECTOR} matches only workers namespace {namespace} may "
                f"not use: {rules}{later}")
    return f"worker access: namespace {namespace} may use no configured worker: {rules}{later}"
