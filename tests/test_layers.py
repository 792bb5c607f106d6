"""The house's layering, held by tools: the import graph has no cycle, imports inside functions and under
TYPE_CHECKING included; the layer table of docs/ARCHITECTURE.md is the import-linter contract of pyproject.toml
(which `lint-imports` checks in .ci/run)."""

from __future__ import annotations

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


if __name__ == "__main__":  # python -m tests.test_layers: the cycles, counted (run-time imports, then all)
    for type_checking in (True, False):
        graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=type_checking, cache_dir=None)
        found = import_cycles(graph)
        print(f"{len(found)} import cycle(s), {'without' if type_checking else 'with'} TYPE_CHECKING imports, "
              f"{sum(map(len, found))} modules in them")
        for cycle in found:
            print("  " + " <-> ".join(cycle))
