"""Fuzzed configurations never give a traceback: whatever the file holds, `load_project` reads a project or raises
one `ProjectError` (a `ScenarioError`), which every front end prints as one message."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import ProjectError
from harness.project import CONFIG_FILE, load_project
from tests.project.test_project import DATA, GOOD

KEYS = ["agent", "mode", "destinations", "intents", "helpy", "api", "openapi", "service", "image", "env",
        "intent_id", "destination", "operation", "params", "scenarios", "delegation", "retention_seconds",
        "agent_timeout_seconds", "idempotency", "lookup", "writes", "effect_ref"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 10**20), st.floats(allow_nan=True),
                    st.text(max_size=30), st.sampled_from(["helpy.yaml", "tickets", "createTicket", "{url}",
                                                           "{params.x}", "black-box", "POST /api/v2/tickets"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


def toml_text(value: object) -> str:
    """A value as TOML, written by hand (the standard library reads TOML but does not write it)."""
    if value is None:
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if value == value and abs(value) != float("inf") else "nan"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').encode("unicode_escape").decode() + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{toml_text(str(k))} = {toml_text(v)}" for k, v in value.items()) + "}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4))
def test_a_mutated_configuration_is_read_or_refused_in_one_message(changes: dict[str, object],
                                                                   tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    shutil.copy(DATA / "helpy.yaml", folder / "helpy.yaml")
    table = tomllib.loads(GOOD)["tool"]["retry-harness"]
    top = {**table, **changes}
    text = "\n".join(f"{toml_text(k)} = {toml_text(v)}" for k, v in top.items())
    (folder / CONFIG_FILE).write_text(text, encoding="utf-8")
    try:
        load_project(folder / CONFIG_FILE)
    except ProjectError as exc:
        assert str(exc).startswith(str((folder / CONFIG_FILE).resolve()))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(max_size=300) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_bytes_that_are_no_configuration_are_one_message(garbage: bytes, tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / CONFIG_FILE).write_bytes(garbage)
    try:
        load_project(folder / CONFIG_FILE)
    except ProjectError:
        pass


def test_a_project_folder_is_where_relative_paths_start(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    shutil.copy(DATA / "helpy.yaml", tmp_path / "sub" / "helpy.yaml")
    (tmp_path / "sub" / "pyproject.toml").write_text(GOOD, encoding="utf-8")
    project = load_project(tmp_path / "sub" / "pyproject.toml")
    assert project.folder == (tmp_path / "sub").resolve()
    assert "--cwd" in (project.agent_command() or "") and str(project.folder) in (project.agent_command() or "")
