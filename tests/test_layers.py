"""The house's layering, held by tools: the import graph has no cycle, imports inside functions and under
TYPE_CHECKING included; the layer table of docs/ARCHITECTURE.md is the import-linter contract of pyproject.toml
(which `lint-imports` checks in .ci/run); no module uses another's private (`_name`) names."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "fake_destinations", "certification")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself), Tarjan's
    algorithm without recursion."""
    imports = {module: sorted(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(imports):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            module, next_child = work.pop()
            if next_child == 0:
                index[module] = low[module] = len(index)
                stack.append(module)
                on_stack.add(module)
            children = imports[module]
            if next_child < len(children):
                work.append((module, next_child + 1))
                child = children[next_child]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1 or module in imports[module]:
                    cycles.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
    return cycles


def test_the_import_graph_has_no_cycle() -> None:
    """Imports inside functions count, and those under TYPE_CHECKING: a lazy import is still a dependency, a
    type named is one for whoever reads the code, and a circle of either is a circle."""
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)
    cycles = import_cycles(graph)
    assert not cycles, "import cycles (each module imports the next): " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles)


def test_the_cycle_finder_finds_a_cycle() -> None:
    class Graph:  # the two calls import_cycles makes of grimp's graph
        modules = {"a", "b", "c", "d"}
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}}

        def find_modules_directly_imported_by(self, module: str) -> set[str]:
            return self.edges[module]

    assert import_cycles(Graph()) == [["a", "b", "c"], ["d"]]  # type: ignore[arg-type]


def contract_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    [layers] = [c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [[name.strip() for name in re.split(r"[:|]", layer)] for layer in layers]


def architecture_layers() -> list[list[str]]:
    """The first column's modules of each row of docs/ARCHITECTURE.md's layer table, top to bottom."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| layer")]
    return [re.findall(r"`([\w.]+)`", row.split("|")[2]) for row in rows]


def test_the_architecture_table_is_the_import_contract() -> None:
    assert architecture_layers() == contract_layers()


def private_reaches(root: Path, base: Path = ROOT) -> list[str]:
    """``from harness.x import _name`` and ``x._name`` (``x`` a module or a name imported from one of ours) in the
    source under ``root``: a leading underscore says only its own module uses a name."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(base)}:{node.lineno}: from {node.module} import {alias.name}")
                    imported.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                imported |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in PACKAGES}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                while isinstance(owner, ast.Attribute):
                    owner = owner.value
                if isinstance(owner, ast.Name) and owner.id in imported:
                    found.append(f"{path.relative_to(base)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_uses_another_modules_private_names() -> None:
    found = [reach for package in PACKAGES for reach in private_reaches(ROOT / package)]
    assert not found, "private names used across modules (make them public): " + "; ".join(found)


def test_the_private_name_finder_finds_one(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("from harness.audit.triage import _x\nimport harness.events\n"
                                   "harness.events._y()\n", encoding="utf-8")
    assert private_reaches(tmp_path, tmp_path) == ["m.py:1: from harness.audit.triage import _x",
                                                   "m.py:3: harness.events._y"]


if __name__ == "__main__":  # python -m tests.test_layers: the cycles, counted (run-time imports, then all)
    for type_checking in (True, False):
        graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=type_checking, cache_dir=None)
        found = import_cycles(graph)
        print(f"{len(found)} import cycle(s), {'without' if type_checking else 'with'} TYPE_CHECKING imports, "
              f"{sum(map(len, found))} modules in them")
        for cycle in found:
            print("  " + " <-> ".join(cycle))
