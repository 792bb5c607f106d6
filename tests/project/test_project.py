"""A project's configuration ([tool.retry-harness]): found where ruff and mypy find theirs, read into the
destinations, intents and agent the catalogue is placed on; every error names the file, the line and the key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.errors import ProjectError
from harness.project import CONFIG_FILE, find_project, load_project

DATA = Path(__file__).parent / "data"
ERRORS = Path(__file__).parent / "errors"

GOOD = """
[tool.retry-harness]
agent = "python agent.py --summary {params.summary}"
mode = "black-box"

[tool.retry-harness.destinations.helpy]
api = "helpy.yaml"
retention_seconds = 3600

[[tool.retry-harness.intents]]
intent_id = "printer-fire"
destination = "helpy"
operation = "post /api/v2/tickets"
params = { summary = "Printer on fire", queue = "OPS", external_id = "inc-1" }
"""


def project_folder(tmp_path: Path, text: str, name: str = "pyproject.toml") -> Path:
    shutil.copy(DATA / "helpy.yaml", tmp_path / "helpy.yaml")
    (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("bad", sorted(ERRORS.glob("*.toml")), ids=lambda p: p.stem)
def test_error_messages_match_their_example_files(bad: Path, tmp_path: Path) -> None:
    """One bad configuration per file, its expected message beside it (FILE its path, DIR its folder)."""
    config = project_folder(tmp_path, bad.read_text(encoding="utf-8"), CONFIG_FILE) / CONFIG_FILE
    with pytest.raises(ProjectError) as caught:
        load_project(config)
    said = str(caught.value).replace(str(config.resolve()), "FILE").replace(str(tmp_path.resolve()), "DIR")
    assert said == bad.with_suffix(".txt").read_text(encoding="utf-8").rstrip("\n")


def test_a_pyproject_table_is_read_with_its_operations_spelled_any_way(tmp_path: Path) -> None:
    project = load_project(project_folder(tmp_path, GOOD) / "pyproject.toml")
    assert project.mode == "black-box" and project.agent_log == "none"
    assert project.per_intent
    (intent,) = project.intents
    assert (intent.kind, intent.destination, intent.params["summary"]) == ("create_ticket", "helpy",
                                                                            "Printer on fire")
    assert project.destinations["helpy"].retention_seconds == 3600
    assert project.operations["helpy"]["POST /api/v2/tickets"] == "create_ticket"


def test_an_error_in_a_pyproject_names_the_table_path_and_its_line(tmp_path: Path) -> None:
    text = GOOD.replace('operation = "post /api/v2/tickets"', 'operation = "createTicket"')
    config = project_folder(tmp_path, text) / "pyproject.toml"
    with pytest.raises(ProjectError) as caught:
        load_project(config)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "createTicket" in row)
    assert str(caught.value).startswith(f"{config.resolve()}:{line}: tool.retry-harness.intents[0].operation: "
                                        "unknown write of 'helpy' 'createTicket'")


def test_the_configuration_is_found_walking_up_and_its_own_file_wins(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_project(deep) is None
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert find_project(deep) is None  # a pyproject without our table is not a configuration
    project_folder(tmp_path, GOOD)
    assert find_project(deep) == (tmp_path / "pyproject.toml").resolve()
    (tmp_path / CONFIG_FILE).write_text("")
    assert find_project(deep) == (tmp_path / CONFIG_FILE).resolve()


def test_an_agent_template_naming_a_param_no_intent_has_is_refused(tmp_path: Path) -> None:
    text = GOOD.replace("{params.summary}", "{params.title}")
    with pytest.raises(ProjectError, match=r"agent: .*title"):
        load_project(project_folder(tmp_path, text) / "pyproject.toml")
