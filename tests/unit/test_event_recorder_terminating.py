"""An Event refused because its namespace is being deleted is not an RBAC problem."""

from __future__ import annotations

import pytest

from kruntime.client import ApiError


@pytest.mark.parametrize(("status", "message", "causes", "expected"), [
    (403, 'events "x." is forbidden: unable to create new content in namespace n because it is being terminated',
     [{"reason": "NamespaceTerminating", "message": "namespace n is being terminated", "field": "metadata.namespace"}],
     True),
    (403, "unable to create new content in namespace n because it is being terminated", [], True),
    (403, 'events is forbidden: User "system:serviceaccount:a:b" cannot create resource "events"', [], False),
    (409, "because it is being terminated", [], False),
])
def test_namespace_terminating(status: int, message: str, causes: list[dict[str, str]], expected: bool) -> None:
    exc = ApiError(status, "Forbidden", message, {"details": {"causes": causes}} if causes else {})
    assert exc.namespace_terminating is expected
