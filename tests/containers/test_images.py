"""The images the harness builds: what they hold, cached while the tree is unchanged, rebuilt (once, however
many processes ask at the same time) after a source change, and clear errors when they cannot be made."""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import fake_destinations
import harness
from harness.containers import docker_client, images
from harness.contract import BASE_IMAGE_ENV
from harness.errors import ContainerError

WAIT = 300  # seconds a one-shot container may take before the test calls it stuck


def run_in(image: str, command: list[str], **options: object) -> tuple[int, str]:
    """Run a one-shot container of ours; its exit status and output; removed whatever happens."""
    container = docker_client.start(image, role="build", run="test_images", command=command, network_mode="host",
                                    **options)
    try:
        status = container.wait(timeout=WAIT)["StatusCode"]
        return status, container.logs().decode()
    finally:
        docker_client.remove(container)


def test_the_runtime_image_runs_the_agents_as_any_user_without_mitmproxy(runtime_image: str) -> None:
    probe = ("import importlib.metadata as m, importlib.util as u, harness.recorder, harness.agents.reference, "
             "harness.agents.wrong.new_key_per_attempt, fake_destinations.http; "
             "print(m.version('retry-harness'), u.find_spec('mitmproxy') is None, "
             "sorted(e.name for e in m.entry_points(group='pytest11')))")
    status, output = run_in(runtime_image, ["python3", "-c", probe], user="1000:1000")
    assert status == 0, output
    version = importlib.metadata.version("retry-harness")
    assert output.split("\n")[0].startswith(f"{version} True ["), output
    assert "'retry_harness'" in output
    status, output = run_in(runtime_image, ["sh", "-c", "sqlite3 -version && python3 -c 'import sqlite3, ssl'"])
    assert status == 0, output


def test_the_harness_image_runs_the_fault_proxy_under_its_own_python(harness_image: str) -> None:
    """The proxy's process gets a PYTHONPATH of its own (harness/proxy/runtime.py): mitmproxy must still be found."""
    probe = ("import mitmproxy.version as v; from harness.proxy.runtime import proxy_python, run_module; "
             "print(v.VERSION, proxy_python()); "
             "done = run_module('harness.proxy.flow_dump', ['/dev/null']); "
             "print(done.returncode, done.stdout.decode())")
    status, output = run_in(harness_image, ["-c", probe], entrypoint=["python3"])
    assert status == 0, output
    version, python, code, *flows = output.split()
    assert version.startswith("11.") and python == "/usr/bin/python3" and code == "0", output
    assert json.loads(" ".join(flows))["flows"] == [], output
    status, output = run_in(harness_image, ["scenarios"])
    assert status == 0 and "response_lost" in output, output


def test_an_unchanged_tree_reuses_its_images(runtime_image: str, harness_image: str) -> None:
    before = {tag: docker_client.client().images.get(tag).id for tag in (runtime_image, harness_image)}
    assert images.ensure_runtime_image() == runtime_image
    assert images.ensure_harness_image() == harness_image
    assert {tag: docker_client.client().images.get(tag).id for tag in before} == before
    cli = subprocess.run([sys.executable, "-m", "harness", "images", "build", "runtime"], capture_output=True,
                         text=True, timeout=WAIT)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith(f"runtime  {runtime_image} (present, also retry-harness/runtime:latest)"), cli.stdout
    listed = subprocess.run([sys.executable, "-m", "harness", "images", "list"], capture_output=True, text=True,
                            timeout=WAIT)
    assert listed.returncode == 0, listed.stderr
    assert any(line.startswith("base") and images.BASE_IMAGE in line for line in listed.stdout.splitlines())
    assert any(line.startswith("runtime") and runtime_image in line for line in listed.stdout.splitlines())


# Asks for the runtime image of the tree it is run from, and says whether this process built it.
ENSURE = """
import json
from harness.containers import images
built = []
build = images._build
images._build = lambda *args, **kwargs: built.append(args[1]) or build(*args, **kwargs)
import harness
print(json.dumps({"tag": images.ensure_runtime_image(), "built": built, "harness": harness.__file__}))
"""


def ensure_in(tree: Path, count: int) -> list[dict[str, object]]:
    """``count`` processes at once, each asking for ``tree``'s runtime image."""
    asks = [subprocess.Popen([sys.executable, "-c", ENSURE], cwd=tree, env={"PATH": "/usr/bin:/bin",
                                                                           "PYTHONPATH": str(tree)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(count)]
    answers = []
    for ask in asks:
        out, err = ask.communicate(timeout=WAIT)
        assert ask.returncode == 0, err
        answers.append(json.loads(out))
    return answers


def test_a_source_change_builds_a_new_image_once_however_many_ask(tmp_path: Path, runtime_image: str) -> None:
    for package in (harness, fake_destinations):
        folder = Path(package.__file__).parent
        shutil.copytree(folder, tmp_path / folder.name, ignore=shutil.ignore_patterns("__pycache__"))
    marker = f"# changed by test {uuid.uuid4().hex}\n"
    with open(tmp_path / "harness" / "contract.py", "a") as contract:
        contract.write(marker)
    first = ensure_in(tmp_path, 2)  # as two pytest-xdist workers would, at the same time
    tag = str(first[0]["tag"])
    try:
        assert all(str(a["harness"]).startswith(str(tmp_path)) for a in first), first
        assert tag != runtime_image and tag.startswith(f"{images.RUNTIME_REPOSITORY}:")
        assert [a["tag"] for a in first] == [tag, tag]
        assert sorted(len(a["built"]) for a in first) == [0, 1], first  # one built it, the other waited
        show = "import harness.contract as c; print(open(c.__file__).read(), end='')"
        status, output = run_in(tag, ["python3", "-c", show])
        assert status == 0 and output.endswith(marker), output[-200:]
        again, = ensure_in(tmp_path, 1)
        assert again == {**first[0], "built": []}
    finally:
        docker_client.client().images.remove(tag)


def test_the_build_lock_is_held_across_processes_and_reentered_in_one(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # a lock of its own: builds beside this test take the real one
    probe = ("import fcntl, sys\nwith open(sys.argv[1], 'w') as f:\n"
             "    try: fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "    except BlockingIOError: print('held')\n    else: print('free')")
    path = str(images.lock_path())
    assert path == str(tmp_path / "retry-harness" / "images.lock")

    def other_process_sees() -> str:
        return subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True,
                              timeout=60).stdout.strip()

    with images.build_lock():
        with images.build_lock():  # the harness image's build holds it while it asks for the runtime's
            assert other_process_sees() == "held"
        assert other_process_sees() == "held"
    assert other_process_sees() == "free"
    with open(path, "w") as handle:  # and it is a plain fcntl lock on that file
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_chosen_base_that_is_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BASE_IMAGE_ENV, "team/python:3.11-missing")
    message = (f"{BASE_IMAGE_ENV}=team/python:3.11-missing: that image is not present .* Python 3.11 .* unset "
               f"{BASE_IMAGE_ENV} to build {images.BASE_IMAGE} with debootstrap")
    with pytest.raises(ContainerError, match=message):
        images.ensure_base_image()
    with pytest.raises(ContainerError, match=message):
        images.ensure_runtime_image()


def test_without_debootstrap_the_base_cannot_be_built_and_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ContainerError, match=f"building {images.BASE_IMAGE} needs debootstrap .* "
                                             f"{BASE_IMAGE_ENV}=<an image with Python 3.11"):
        images._debootstrap_base()


def test_a_team_dockerfile_builds_from_ours_and_its_errors_are_clear(tmp_path: Path, runtime_image: str) -> None:
    tag = f"rh-test-team:{uuid.uuid4().hex[:8]}"
    (tmp_path / "Dockerfile").write_text(f"FROM {runtime_image} AS built\nRUN echo from-the-team > /team\n"
                                         'CMD ["cat", "/team"]\n')
    try:
        assert images.build(tmp_path, tag) == tag
        labels = docker_client.client().images.get(tag).labels
        assert labels["io.retry-harness.image"] == "built" and labels["io.retry-harness.role"] == "build"
        assert run_in(tag, ["cat", "/team"]) == (0, "from-the-team\n")
    finally:
        docker_client.client().images.remove(tag)
    (tmp_path / "Dockerfile").write_text(f"FROM {runtime_image}\nRUN echo about to fail && false\n")
    with pytest.raises(ContainerError, match=r"(?s)cannot build image .* returned a non-zero code: 1\n.*about to fail"):
        images.build(tmp_path, tag)
    (tmp_path / "Dockerfile").write_text("FROM team/never-built:1\n")
    with pytest.raises(ContainerError, match="image team/never-built:1 is not present .*never pulls"):
        images.build(tmp_path, tag)
    (tmp_path / "Dockerfile").unlink()
    with pytest.raises(ContainerError, match=f"{tmp_path}: no Dockerfile there"):
        images.build(tmp_path, tag)
