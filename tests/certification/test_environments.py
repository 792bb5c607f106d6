"""One environment per certified SDK release (certification/environments.py), made by uv from the package index,
and `python -m certification --sdk` on it: the real uv, the real index, the real connectors through the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from certification.environments import EnvironmentError_, environment, pinned

REPO = Path(__file__).resolve().parents[2]


def test_a_pinned_requirement_is_taken_as_given_and_a_bare_name_resolves_to_a_release() -> None:
    assert pinned("openai==3.51.0") == "openai==3.51.0"
    assert pinned("OpenAI == 3.51.0") == "openai==3.51.0"
    newest = pinned("openai")
    assert newest.startswith("openai==") and Version(newest.split("==")[1]) >= Version("3.60.0"), newest
    ranged = pinned("openai<3")
    assert Version(ranged.split("==")[1]) < Version("3"), ranged


@pytest.mark.parametrize(("requirement", "said"), [
    ("openai===", "is not a requirement"), ("openai @ https://example.invalid/x.whl", "without URL or marker"),
    ("no-such-package-retry-harness-test==1.0", "uv could not install no-such-package-retry-harness-test==1.0 "),
    ("no-such-package-retry-harness-test==1.0", "no such package: no-such-package-retry-harness-test"),
    # a release that does not exist: said, with the newest that does (what resolves instead)
    ("openai==9.9.9", "uv could not install openai==9.9.9 (beside requests==2.34.2, urllib3==2.8.0, httpx==0.28.1): "
                      "no such version: openai==9.9.9; the newest is openai=="),
    # a release whose own pins conflict with the bare clients the connectors run beside: uv's reason, in one line
    ("botocore==1.29.0", "conflicting pins: botocore==1.29.0 depends on urllib3>=1.25.4,<1.27; asked for "
                         "botocore==1.29.0, urllib3==2.8.0"),
])
def test_a_bad_requirement_is_a_clear_error_and_leaves_nothing_half_made(requirement: str, said: str,
                                                                         tmp_path: Path) -> None:
    with pytest.raises(EnvironmentError_) as caught:
        environment(requirement, root=tmp_path)
    assert said in str(caught.value) and "\n" not in str(caught.value), caught.value
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


def test_an_environment_is_made_once_holds_the_release_and_no_harness_and_a_half_made_one_is_made_again(
        tmp_path: Path) -> None:
    made = environment("backoff==2.2.1", root=tmp_path)
    assert made.version("backoff") == "2.2.1" and made.version("requests") == "2.34.2"
    assert "mitmproxy" not in made.versions and "retry-harness" not in made.versions
    imported = subprocess.run([str(made.python), "-c", "import backoff, requests; print(backoff.__version__)"],
                              capture_output=True, text=True, timeout=60, check=True)
    assert imported.stdout.strip() == "2.2.1"
    marker = made.python.parents[1] / ".complete.json"
    stamp = marker.stat().st_mtime_ns
    assert environment("backoff==2.2.1", root=tmp_path) == made and marker.stat().st_mtime_ns == stamp  # reused
    marker.unlink()  # as a run killed while making it leaves it
    again = environment("backoff==2.2.1", root=tmp_path)
    assert again.python == made.python and marker.exists()


def test_an_environments_modules_are_byte_compiled_and_one_made_before_that_is_compiled_once(tmp_path: Path) -> None:
    """An agent runs in a sandbox where the environment is read-only: a module without its bytecode would be compiled
    again at every start (crewAI's import: 4.3 s of CPU against 2.3 s)."""
    made = environment("backoff==2.2.1", root=tmp_path)
    cached = ("import importlib.util as u, backoff, requests; "
              "print(all(__import__('os').path.exists(u.cache_from_source(m.__file__)) for m in (backoff, requests)))")

    def compiled() -> str:  # -B: the check itself writes nothing
        return subprocess.run([str(made.python), "-B", "-c", cached], capture_output=True, text=True, timeout=60,
                              check=True).stdout.strip()

    assert compiled() == "True"
    folder = made.python.parents[1]
    for pyc in folder.rglob("*.pyc"):  # as an environment made before its installs were compiled
        pyc.unlink()
    (folder / ".bytecode").unlink()
    assert compiled() == "False"
    assert environment("backoff==2.2.1", root=tmp_path) == made
    assert compiled() == "True" and (folder / ".bytecode").exists()


def test_certify_sdk_runs_that_releases_connectors_and_compares_them_with_the_published_cells(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "certification", "--sdk", "openai==3.51.0", "--evidence-dir",
                           str(tmp_path / "evidence")], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| `openai_")]
    assert len(rows) == 2 and all("(openai 3.51.0)" in row for row in rows), done.stdout
    assert "8 as published, 0 differ" in done.stdout, done.stdout
    assert not (REPO / "certification" / "MATRIX.md").read_text(encoding="utf-8").count("openai 3.51.0")


@pytest.mark.parametrize(("argv", "said"), [
    (["--sdk", "numpy"], "--sdk numpy: no connector certifies numpy; valid: anthropic, backoff, boto3"),
    (["--sdk", "openai==="], "is not a requirement"),
    (["--framework", "numpy==1.0"], "--framework numpy==1.0: neither an agent nor a framework of expected.yaml; "
                                    "valid agents: langgraph_safe"),
    (["--framework", "crewai==1.15.30", "--sdk", "openai"], "give --sdk or a --framework release, not both"),
    (["--framework", "agno>=3", "--framework", "crewai_safe"], "--framework crewai_safe: not an agent of the "
                                                               "framework given a release (agno>=3)"),
])
def test_certify_sdk_says_what_is_wrong_with_its_argument(argv: list[str], said: str) -> None:
    done = subprocess.run([sys.executable, "-m", "certification", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and said in done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("argv", "said"), [
    (["--sdk", "openai==9.9.9"], "python -m certification: uv could not install openai==9.9.9 (beside "),
    # a framework's environment is made before the cells' processes, not inside one (no traceback out of the pool)
    (["--framework", "crewai==9.9.9"], "python -m certification: uv could not install crewai==9.9.9 beside the "
                                       "harness's dependencies: no such version: crewai==9.9.9; the newest is "
                                       "crewai=="),
    (["--framework", "crewai==="], "python -m certification: --framework 'crewai===' is not a requirement"),
])
def test_an_environment_that_cannot_be_made_is_one_line_naming_the_release_and_the_newest(
        argv: list[str], said: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "certification", *argv, "--evidence-dir", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith(said), done.stderr
    assert list(tmp_path.iterdir()) == []  # no cell ran
