"""Fixture pair for the fake destinations: one process for the session, cleared before each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fake_destinations.host import DestinationHost

# Every destination the destination tests talk to, served by one process for the whole session.
CATALOGUE = {
    "tickets": {"service": "tickets"},
    "tickets_ietf": {"service": "tickets", "idempotency": "ietf", "processing_delay_seconds": 1.0},
    "tickets_failing": {"service": "tickets", "failures": [
        {"at": 1, "fault": "error_before_commit"}, {"at": 3, "fault": "error_after_commit", "status": 503}]},
    "tickets_short_keys": {"service": "tickets", "retention_seconds": 60},
    "tickets_lagging": {"service": "tickets", "lookup_lag_seconds": 5},
    "tickets_scoped": {"service": "tickets", "key_scope": "account", "volatile_fields": ["sent_at"]},
    "tickets_path_scoped": {"service": "tickets", "key_scope": "path"},
    "tickets_limited": {"service": "tickets", "rate_limit": {"max_requests": 2, "per_seconds": 60,
                                                             "retry_after_seconds": 7},
                        "failures": [{"at": 1, "fault": "rate_limited", "retry_after_seconds": 3}]},
    "payments": {"service": "payments"},
    "accounts": {"service": "accounts"},
    "accounts_notifying": {"service": "accounts", "put_notifies": True},
    "webhooks": {"service": "webhooks"},
    "vms": {"service": "vms"},
    "vms_failing": {"service": "vms", "failures": [{"at": 1, "fault": "error_before_commit"}]},
    "email": {"service": "email"},
    "deployments": {"service": "deployments", "async_completion_seconds": 30},
    "ssh": {"service": "ssh", "failures": [{"at": 2, "fault": "drop_after_exec"}]},
}


@pytest.fixture(scope="session")
def destination_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DestinationHost]:
    folder = tmp_path_factory.mktemp("destinations")
    host = DestinationHost(CATALOGUE, folder / "ledger.sqlite", log_path=folder / "destinations.log")
    try:
        host.start()
        yield host
    finally:
        host.stop()


@pytest.fixture
def destinations(destination_host: DestinationHost) -> DestinationHost:
    """The session's destinations, with keys, resources, clock and ledger cleared."""
    destination_host.reset()
    return destination_host
