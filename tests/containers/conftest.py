"""The container tests: a real Docker engine, images built here from the project (docs/containers.md).

Every test in this folder is marked ``docker``. Without an engine each one FAILS with the engine's
address and what to do, never a silent skip; ``HARNESS_NO_DOCKER=1`` says there is deliberately no engine,
and then they skip with that reason. After each test nothing of this process's may remain: a leftover
container, network or volume is removed and fails the test that left it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

NO_DOCKER_ENV = "HARNESS_NO_DOCKER"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.docker)


def require_engine() -> None:
    """Skip under HARNESS_NO_DOCKER=1; fail, saying where no engine answers and what to do, without one."""
    if os.environ.get(NO_DOCKER_ENV) == "1":
        pytest.skip(f"{NO_DOCKER_ENV}=1: the container tests need a Docker engine")
    from harness.containers import docker_client
    from harness.errors import ContainerError

    try:
        docker_client.client()
    except ContainerError as exc:
        message = f"{exc} (set {NO_DOCKER_ENV}=1 to skip the container tests where there is deliberately none)"
    else:
        return
    pytest.fail(message, pytrace=False)  # outside the except: the message alone, no chained traceback


@pytest.fixture(autouse=True)
def docker_engine(request: pytest.FixtureRequest) -> Iterator[None]:
    """The engine answers (see ``require_engine``), and the test leaves nothing of this process's behind."""
    if request.node.get_closest_marker("docker") is None:
        yield
        return
    require_engine()
    from harness.containers import docker_client

    yield
    leftovers = docker_client.remove_ours(docker_client.OWNER)
    assert not any(leftovers.values()), f"the test left containers, networks or volumes of ours: {leftovers}"


@pytest.fixture(scope="session")
def runtime_image() -> str:
    """This tree's runtime image, built once per process if the engine does not have it yet."""
    require_engine()  # session fixtures are set up before the autouse check above
    from harness.containers.images import ensure_runtime_image

    return ensure_runtime_image()


@pytest.fixture(scope="session")
def harness_image() -> str:
    require_engine()
    from harness.containers.images import ensure_harness_image

    return ensure_harness_image()
