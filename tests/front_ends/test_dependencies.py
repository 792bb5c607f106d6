"""The runtime dependencies are what the product imports: every third-party module that harness/ and
fake_destinations/ import (at module level or inside a function) comes from a declared dependency, and
every declared dependency is imported. What only the tests import lives in the `test` extra."""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
import tomllib
from importlib.metadata import distribution, packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("harness", "fake_destinations")
# imported directly, installed (and pinned) by a declared dependency: declaring it again would only
# invite a second, conflicting bound
COMES_WITH = {"pydantic-core": "pydantic", "uvicorn": "mcp"}  # uvicorn: the server mcp serves HTTP with
# the OpenAPI reading's libraries (harness/openapi.py, fake_destinations/request_schema.py), all the validator's
COMES_WITH |= {"jsonschema": "openapi-spec-validator", "referencing": "openapi-spec-validator",
               "openapi-schema-validator": "openapi-spec-validator"}
# modules a declared dependency brings in one of its majors only: mcp 2.x's own HTTP client (harness.agents.mcp_client
# imports it only under mcp 2.x); counted as that dependency's whichever major is installed here
BROUGHT_BY = {"httpx2": "mcp"}
# never installed where the tests run: crewAI cannot sit beside mitmproxy 11 (the test extra); its extra declares it
# and the certification runs it in an environment of its own (certification/environments.py)
BROUGHT_BY["crewai"] = "crewai"
# declared for the user's pytest to load, never imported: `-n 2` of `pytest --scenario all -n 2`, which the
# docs give as the way to run the catalogue (the plugin only reads what xdist carries back)
LOADED_BY_PYTEST = {"pytest-xdist"}
# optional imports, each declared in its extra: harness.instrument patches httpx only when it is installed (an
# ImportError skips it) and the tenacity example agent uses what it demonstrates; the OpenTelemetry exporter and
# the framework agents import what their extra installs
OPTIONAL_IMPORTERS = {
    "instrument": ("harness/instrument.py", "harness/agents/instrumented/tenacity_retry.py"),
    "otel": ("harness/otel/*", "harness/agents/otel/*"),
    "frameworks": ("harness/agents/frameworks/*",),
    "crewai": ("harness/agents/frameworks/crewai_agent.py",),
    "durable": ("harness/agents/durable/*",),
    # the Spark engine; triage.py imports pyarrow only in features_of_batch, which Spark's executors run
    "spark": ("harness/audit/spark_engine.py", "harness/audit/triage.py"),
}


def _optional(dist: str, files: set[str]) -> bool:
    """Imported only by files of extras that declare it (each file by one whose globs name it)."""
    return all(any(dist in declared(extra) and any(fnmatch.fnmatch(f, g) for g in globs)
                   for extra, globs in OPTIONAL_IMPORTERS.items()) for f in files)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(extra: str | None = None) -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return {_canonical(re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]) for req in requirements}


def imported_distributions() -> dict[str, set[str]]:
    """Distribution -> the product files that import one of its modules."""
    owners = packages_distributions()
    found: dict[str, set[str]] = {}
    for package in PRODUCT:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".", 1)[0]
                    if top in sys.stdlib_module_names or top in PRODUCT or top == "__future__":
                        continue
                    provided = [BROUGHT_BY[top]] if top in BROUGHT_BY else owners.get(top)
                    for dist in _providers(name, provided or [f"<no installed distribution for {top}>"]):
                        found.setdefault(_canonical(dist), set()).add(str(path.relative_to(REPO)))
    return found


def _providers(module: str, dists: list[str]) -> list[str]:
    """The distributions that install ``module``: of a namespace package's (``opentelemetry``: api, sdk,
    proto, ...), those holding its folder or file, not every one sharing the top-level name."""
    if len(dists) < 2:
        return dists
    parts = module.split(".")
    for depth in range(len(parts), 1, -1):
        prefix = "/".join(parts[:depth])
        found = [d for d in dists if any(str(f).startswith((prefix + "/", prefix + ".py"))
                                         for f in distribution(d).files or [])]
        if found:
            return found
    return dists


def proxy_runtime() -> set[str]:
    """What the fault proxy's own interpreter is made with (harness/proxy/runtime.py), not the harness's."""
    from harness.proxy.runtime import REQUIREMENTS

    return {_canonical(re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]) for req in REQUIREMENTS}


def test_every_third_party_import_of_the_product_is_a_runtime_dependency() -> None:
    runtime = declared()
    missing = {dist: sorted(files) for dist, files in imported_distributions().items()
               if dist not in runtime and COMES_WITH.get(dist) not in runtime}
    # mitmproxy: imported only by the proxy process's modules, which run under the proxy's runtime
    proxy_only = {dist for dist, files in missing.items()
                  if dist in proxy_runtime() and all(f.startswith("harness/proxy/") for f in files)}
    missing = {dist: files for dist, files in missing.items() if dist not in proxy_only}
    missing = {dist: files for dist, files in missing.items() if not _optional(dist, set(files))}
    assert not missing, f"imported by the product but not in [project] dependencies: {missing}"
    assert proxy_only == {"mitmproxy"}, proxy_only


def test_every_runtime_dependency_is_imported_by_the_product() -> None:
    unused = declared() - set(imported_distributions()) - LOADED_BY_PYTEST
    assert not unused, f"runtime dependencies the product never imports (move them to the test extra): {unused}"


def test_what_pytest_loads_is_registered_as_a_pytest_plugin() -> None:
    """An exemption from being imported holds only for a distribution pytest itself loads (a pytest11 entry point)."""
    for dist in LOADED_BY_PYTEST:
        assert dist in declared(), dist
        assert any(ep.group == "pytest11" for ep in distribution(dist).entry_points), dist


def test_test_only_libraries_are_in_the_test_extra_not_the_runtime() -> None:
    runtime, test = declared(), declared("test")
    # jsonschema was one too, until the OpenAPI reading made it the runtime's (COMES_WITH: openapi-spec-validator)
    for name in ("httpx",):
        assert name in test and name not in runtime, name
        importers = imported_distributions().get(name, set())
        assert not importers or _optional(name, importers), f"{name} is imported by the product: {importers}"
