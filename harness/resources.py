"""The data files shipped inside the ``harness`` package, found through ``importlib.resources``.

The scenario catalogue (``harness/scenarios/*.yaml``), the API profiles (``harness/apis/*.yaml``), the
matrix's expected outcomes (``harness/expected_outcomes.yaml``) and the published JSON Schemas
(``harness/schemas/*.json``)
are package data (``[tool.setuptools.package-data]``): they are where the package is, in a clone
(editable install) and in a wheel alike, never looked up relative to a source tree.

The harness hands these files to other code by path (pytest collects scenario files, ``context.json``
records the scenario's file, the agent's supervisor runs as a file), so the package must be
installed as plain files (a wheel or a source folder; pip always does so). A package imported from
a zip archive gets a ``HarnessError`` naming the resource, not a traceback later on.

Standard library only: the pytest plugin imports this module when ``--scenario`` is given.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from harness.errors import HarnessError

PACKAGE = "harness"
CATALOGUE_DIR = "scenarios"  # harness/scenarios/NAME.yaml
EXPECTED_OUTCOMES_FILE = "expected_outcomes.yaml"
SCHEMA_DIR = "schemas"
SCENARIO_SCHEMA_FILE = "scenario.schema.json"
API_SCHEMA_FILE = "api.schema.json"
AUDIT_EVENT_SCHEMA_FILE = "audit-event.schema.json"
API_PROFILE_DIR = "apis"  # harness/apis/NAME.yaml: generic destinations of well-known APIs (`api: NAME`)


def package_path(*parts: str) -> Path:
    """The file-system path of ``harness/<parts...>``, a file or a folder shipped in the package.

    With any normal install ``files("harness")`` is a real folder, so the Traversable is already a
    ``Path``; anything else (a zip import) cannot give the harness the plain files it needs."""
    resource = files(PACKAGE).joinpath(*parts)
    if isinstance(resource, Path):
        return resource
    raise HarnessError(
        f"the {PACKAGE} package is not installed as plain files, so its data {'/'.join(parts)!r} has no "
        f"path ({resource!r}); install retry-harness with pip (a wheel or a source folder), not from a zip")


def catalogue_dir() -> Path:
    """The bundled scenario catalogue: ``harness/scenarios``."""
    return package_path(CATALOGUE_DIR)


def catalogue() -> list[Path]:
    """The bundled scenario files, sorted by name; a ``HarnessError`` when there is none (a broken
    install: every release ships the catalogue)."""
    folder = catalogue_dir()
    found = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not found:
        state = "holds no scenario file (*.yaml)" if folder.is_dir() else "does not exist"
        raise HarnessError(f"the bundled scenario catalogue {folder} {state}: this installation of "
                           "retry-harness is incomplete; reinstall it (pip install --force-reinstall retry-harness)")
    return found


def expected_outcomes_file() -> Path:
    """The certification matrix's expected outcomes: ``harness/expected_outcomes.yaml``."""
    return package_path(EXPECTED_OUTCOMES_FILE)


def schema_file(name: str) -> Path:
    """A published JSON Schema: ``harness/schemas/<name>``."""
    return package_path(SCHEMA_DIR, name)


def api_profile(name: str) -> Path:
    """A bundled API profile's file (it may not exist: the caller says which ones do)."""
    return package_path(API_PROFILE_DIR, f"{name}.yaml")


def api_profiles() -> list[str]:
    """The names of the bundled API profiles, sorted."""
    folder = package_path(API_PROFILE_DIR)
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
