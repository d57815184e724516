"""The README stays a front door: short, its two commands real, every relative link pointing at a file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
MAX_LINES = 250


def test_readme_is_short() -> None:
    lines = README.count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines (at most {MAX_LINES}): move detail into docs/"


def test_the_two_commands_are_make_targets() -> None:
    assert "make demo" in README and "make test" in README
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    assert {"demo", "test", "e2e-kind", "docs", "lock"} <= targets


def test_relative_links_point_at_files() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    relative = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert relative, "no relative link found"
    missing = [t for t in relative if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
