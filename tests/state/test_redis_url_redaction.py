"""The Redis password in ``state.url`` never reaches a log line or a status report (issue 23):
checked against a real redis-server that requires the password, through an outage and back."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _redis import RedisServer

from switchyard.protocol.redact import redact_url, redact_urls
from switchyard.state.redis_store import RedisStore

pytestmark = pytest.mark.integration

PASSWORD = "hunter2-state-secret"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path, password=PASSWORD).start()
    try:
        yield srv
    finally:
        srv.stop()


def test_redact_url_keeps_the_address_and_drops_the_credentials() -> None:
    assert redact_url("redis://:pw123456@10.0.0.5:6379/0") == "redis://***@10.0.0.5:6379/0"
    assert redact_url("rediss://user:pw123456@cache.internal/2") == "rediss://***@cache.internal/2"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    said = "Error connecting to redis://:pw123456@10.0.0.5:6379/0 and https://a:b@h/x"
    assert redact_urls(said) == "Error connecting to redis://***@10.0.0.5:6379/0 and https://***@h/x"


async def test_outage_warnings_and_status_name_the_server_without_its_password(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert PASSWORD in server.url
    store = RedisStore(server.url, timeout_s=0.3, retry_interval_s=0.05)
    await store.set("k", {"n": 1})
    caplog.set_level(logging.WARNING, logger="switchyard.state")
    server.kill()
    await store.get("k")  # fails over to the local copy: the outage warning
    assert store.degraded
    server.start()
    deadline = time.monotonic() + 10
    while store.degraded and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not store.degraded
    lines = [r.getMessage() for r in caplog.records]
    assert any("unavailable" in line for line in lines) and any("answers again" in line for line in lines)
    assert all(PASSWORD not in line for line in lines), lines
    assert any(f"redis://***@127.0.0.1:{server.port}/0" in line for line in lines)
    assert PASSWORD not in str(store.status())
    await store.aclose()
