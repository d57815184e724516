"""``kubectl jobmirror`` finds the inspect Service by its labels when ``--inspect-service`` is not given."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kruntime.client import ApiError, ClusterClient
from kruntime.helpformat import subcommands
from mirror.cli import build_parser
from mirror.inspect import plugin


def service(ns: str, name: str, *ports: str) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"ports": [{"name": p} for p in ports]}}


class Manager:
    """Answers the one list the lookup makes."""

    def __init__(self, items: list[dict[str, Any]] | None = None, status: int = 0) -> None:
        self.items, self.status = items or [], status
        self.calls: list[tuple[str, str | None, dict[str, Any]]] = []

    async def list_all(self, res: Any, ns: str | None, **kw: Any) -> tuple[list[dict[str, Any]], str]:
        self.calls.append((res.plural, ns, kw))
        if self.status:
            raise ApiError(self.status, "Forbidden", "services is forbidden")
        return self.items, "1"


async def find(m: Manager) -> str:
    return await plugin.find_inspect_service(cast(ClusterClient, m))


async def test_one_labelled_service_with_the_inspect_port_is_used() -> None:
    m = Manager([service("ops", "prod-jobmirror-metrics", "metrics"),
                 service("ops", "prod-jobmirror-inspect", "inspect")])
    assert await find(m) == "ops/https:prod-jobmirror-inspect:inspect"
    assert m.calls == [("services", None, {"label_selector": plugin.INSPECT_SERVICE_SELECTOR})]


@pytest.mark.parametrize(("items", "message"), [
    ([], "no inspect Service (app.kubernetes.io/part-of=jobmirror,app.kubernetes.io/component=controller, port "
         "'inspect') on the manager: pass --inspect-service namespace/https:service:inspect, or --config"),
    ([service("a", "jobmirror-inspect", "inspect"), service("b", "jobmirror-inspect", "inspect")],
     "2 inspect Services on the manager (a/https:jobmirror-inspect:inspect, b/https:jobmirror-inspect:inspect): "
     "pick one with --inspect-service"),
])
async def test_none_or_several_is_one_line_naming_the_flag(items: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(plugin.UsageError) as err:
        await find(Manager(items))
    assert str(err.value) == message


async def test_a_user_who_may_not_list_services_gets_the_conventional_name() -> None:
    assert await find(Manager(status=403)) == plugin.DEFAULT_INSPECT_SERVICE


def test_help_shows_the_https_scheme_and_the_defaults() -> None:
    assert build_parser("kubectl jobmirror").parse_args(["describe", "x"]).inspect_service is None
    help_ = "".join(subcommands(build_parser("kubectl jobmirror"))["describe"].format_help().split())
    assert "namespace/https:service:port" in help_ and "jobmirror-system/https:jobmirror-inspect:inspect" in help_
    assert "(default:10.0)" in help_ and "(default:jobmirror.dev/controller)" in help_
