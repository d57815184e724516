"""Worker-selector parsing and matching (mirror/room/selector.py), kubectl's label-selector syntax."""

from __future__ import annotations

import pytest

from mirror.worker_selector import SelectorError, matches, parse


@pytest.mark.parametrize(("selector", "labels", "want"), [
    ("", {}, True),
    ("env=prod", {"env": "prod"}, True),
    ("env==prod", {"env": "dev"}, False),
    ("env!=prod", {}, True),
    ("env!=prod", {"env": "prod"}, False),
    ("region in (eu, us),gpu", {"region": "us", "gpu": "x"}, True),
    ("region in (eu, us),gpu", {"region": "us"}, False),
    ("region notin (eu)", {"region": "eu"}, False),
    ("!spot", {"spot": "true"}, False),
    ("!spot, example.com/tier = batch", {"example.com/tier": "batch"}, True),
])
def test_selector(selector: str, labels: dict[str, str], want: bool) -> None:
    assert matches(parse(selector), labels) is want


@pytest.mark.parametrize("bad", ["env=", "=prod", "a in ()", "a in b", "a b", "a,,b", "a=b=c"])
def test_bad_selector_names_the_requirement(bad: str) -> None:
    if bad == "env=":  # an empty value is legal in kubectl's syntax
        assert matches(parse(bad), {"env": ""})
        return
    with pytest.raises(SelectorError, match="'"):
        parse(bad)
