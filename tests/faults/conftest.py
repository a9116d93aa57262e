"""Fixtures of the provider-fault suite: a real local HTTP server for hangs and trickles."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.faults.server import FaultServer


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A local OpenAI-compatible server with an empty script (`fault_server.add(...)` queues behaviours)."""
    with FaultServer() as server:
        yield server
