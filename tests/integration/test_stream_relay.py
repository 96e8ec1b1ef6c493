"""The proxy relays SSE as it arrives: TCP_NODELAY on, one upstream event → one client read."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from switchyard._listen import bind
from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, Turn

# Long enough that a reader descheduled on a busy machine still sees each event in a read of its
# own (at 30 ms, two events sometimes shared one read under CPU stress).
PER_CHUNK_S = 0.2


def test_listening_socket_and_accepted_connections_have_nodelay() -> None:
    listener = bind("127.0.0.1", 0)
    try:
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        listener.setblocking(True)
        client = socket.create_connection(listener.getsockname()[:2], timeout=5)
        accepted, _ = listener.accept()
        with client, accepted:
            # Linux copies TCP_NODELAY from the listener to what it accepts.
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        listener.close()


@pytest.fixture(scope="module")
def proxy(module_upstream: Any, module_config: dict[str, Any]) -> Iterator[ServerThread]:
    # Five content events, each written by the upstream PER_CHUNK_S after the previous one.
    module_upstream.app.models["fake-drip"] = FakeModel(
        "fake-drip", per_chunk_s=PER_CHUNK_S, brain=lambda body, model: Turn(text="a b c d e")
    )
    config = {
        **module_config,
        "targets": {**module_config["targets"], "drip": {"client": "local", "model": "fake-drip"}},
    }
    config["routes"] = {"drip": {"type": "passthrough", "target": "drip"}}
    with ServerThread(Switchyard.from_config(config)) as server:
        yield server


def test_five_upstream_events_arrive_as_at_least_five_reads(proxy: ServerThread) -> None:
    with openai.OpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        started = time.perf_counter()
        reads: list[tuple[float, bytes]] = []
        with client.chat.completions.with_streaming_response.create(
            model="drip", messages=[{"role": "user", "content": "go"}], stream=True
        ) as response:
            for chunk in response.iter_bytes():
                reads.append((time.perf_counter() - started, chunk))
    body = b"".join(chunk for _, chunk in reads)
    assert body.count(b'"content":"') >= 5 and body.endswith(b"data: [DONE]\n\n")
    # Reads carrying a non-empty content delta (the role chunk's ``"content":""`` may share one).
    content_reads = [t for t, chunk in reads if re.search(rb'"content":"[^"]', chunk)]
    assert len(content_reads) >= 5, [chunk for _, chunk in reads]
    # And spread over time as the upstream wrote them, not delivered in one burst at the end.
    assert content_reads[-1] - content_reads[0] >= 3 * PER_CHUNK_S
