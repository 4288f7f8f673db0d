"""The layers' arrows point one way: ``ui/app -> experiments -> executor -> simulator ->
models -> synth``. A module may import its own package and the packages below it, never
one above (a deferred import inside a function counts too: it is still an arrow)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: each package, bottom first; a package may import only those before it in this list
ORDER = ("synth", "models", "simulator", "executor", "experiments", "ui")


def _imports(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


@pytest.mark.parametrize("pkg", ORDER[:-1])
def test_no_package_imports_a_layer_above_it(pkg):
    above = set(ORDER[ORDER.index(pkg) + 1:]) | {"app"}
    bad = [f"{p.relative_to(ROOT)}:{line} imports {mod}"
           for p in sorted((ROOT / pkg).rglob("*.py"))
           for line, mod in _imports(p) if mod in above]
    assert not bad, bad


def test_the_checker_sees_a_deferred_upward_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from experiments.suites import load_suite\n")
    assert (2, "experiments") in list(_imports(f))
