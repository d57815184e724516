"""mirror/ imports nothing of builtin_controller/: the two controllers share jobapi/ and kruntime/ below them.

Tools that read both (the reference-docs generator) live above them, in refdocs/. (The builtin controller
reads only the package version from mirror/, its one source.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return found | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def test_the_mirror_imports_nothing_of_the_builtin_controller() -> None:
    leaks = sorted(f"{p.relative_to(ROOT)}: {m}" for p in (ROOT / "mirror").rglob("*.py")
                   for m in _imports(p) if m == "builtin_controller" or m.startswith("builtin_controller."))
    assert not leaks, leaks
