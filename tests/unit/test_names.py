import pytest

from kruntime.names import InvalidName, check_name, check_namespace, segment
from kruntime.resources import JOBS


@pytest.mark.parametrize(("value", "ok"), [
    ("a", True), ("team-a", True), ("a" * 63, True), ("a" * 64, False), ("A", False), ("-a", False),
    ("a-", False), ("a.b", False), ("", False), ("..", False), ("a/b", False),
])
def test_namespaces_are_labels(value: str, ok: bool) -> None:
    if ok:
        assert check_namespace(value) == value
    else:
        with pytest.raises(InvalidName, match="namespace"):
            check_namespace(value)


@pytest.mark.parametrize(("value", "ok"), [
    ("a", True), ("a.b", True), ("a-b.c-d", True), ("a" * 253, True), ("a" * 254, False), ("a..b", False),
    (".a", False), ("a/b", False), ("a%2Fb", False), ("", False),
])
def test_names_are_subdomains(value: str, ok: bool) -> None:
    if ok:
        assert check_name(value) == value
    else:
        with pytest.raises(InvalidName, match="name"):
            check_name(value)


@pytest.mark.parametrize(("value", "escaped"), [
    ("job", "job"), ("a/b", "a%2Fb"), ("a%2Fb", "a%252Fb"), ("../x", "..%2Fx"), ("a?b#c", "a%3Fb%23c"),
])
def test_segments_stay_in_their_place(value: str, escaped: str) -> None:
    assert segment(value) == escaped


@pytest.mark.parametrize("value", ["", ".", ".."])
def test_segments_that_would_be_resolved_are_refused(value: str) -> None:
    with pytest.raises(InvalidName):
        segment(value)


def test_resource_paths_escape_every_segment() -> None:
    path = JOBS.path("ns", "../../kube-system/secrets/x")
    assert "/../" not in path and path.endswith("/jobs/..%2F..%2Fkube-system%2Fsecrets%2Fx")
