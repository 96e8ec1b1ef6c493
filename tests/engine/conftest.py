"""A scripted in-memory backend and an engine built from a config over it (no HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from switchyard.config import build_engine, load_config
from switchyard.engine import DecisionRecord, Engine
from switchyard.protocol.call import CallOptions
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import StreamAccumulator, StreamEvent, response_to_events
from switchyard.protocol.targets import TargetInfo

Script = ChatResponse | Exception | Sequence["StreamEvent | Exception | float"]
"""A reply: a response, an error raised at the call, or stream items (events, errors raised
mid-stream, and floats = pauses in seconds)."""


class ScriptedBackend:
    """A :class:`~switchyard.protocol.call.ModelBackend` answering from a script per target name."""

    def __init__(self, script: dict[str, list[Script]]) -> None:
        self.script = script
        self.calls: list[tuple[str, str, ChatRequest, CallOptions]] = []  # (kind, target, request, options)
        self.closed_streams = 0
        self.closed = False

    def _next(self, target: str) -> Script:
        replies = self.script[target]
        return replies.pop(0) if len(replies) > 1 else replies[0]

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        self.calls.append(("complete", target.name, request, options))
        reply = self._next(target.name)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, ChatResponse):
            return reply
        acc = StreamAccumulator()
        for item in reply:
            if isinstance(item, Exception):
                raise item
            if not isinstance(item, float):
                acc.add(item)
        return acc.response()

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        self.calls.append(("stream", target.name, request, options))
        reply = self._next(target.name)
        if isinstance(reply, Exception):
            raise reply
        items: Sequence[StreamEvent | Exception | float] = (
            response_to_events(reply) if isinstance(reply, ChatResponse) else reply
        )
        return self._iterate(items)

    async def _iterate(self, items: Sequence[StreamEvent | Exception | float]) -> AsyncIterator[StreamEvent]:
        try:
            for item in items:
                if isinstance(item, Exception):
                    raise item
                if isinstance(item, float):
                    await asyncio.sleep(item)
                    continue
                yield item
        finally:
            self.closed_streams += 1

    async def aclose(self) -> None:
        self.closed = True

    def targets_called(self) -> list[str]:
        return [name for _, name, _, _ in self.calls]


BASE_CONFIG: dict[str, Any] = {
    # No same-target retries here: these tests are about the order of candidates and the record;
    # retries and breakers have their own tests (tests/engine/test_fallback_loop.py and others).
    "llm_clients": {
        "up": {
            "format": "openai_chat",
            "base_url": "http://127.0.0.1:9/v1",
            "max_retries": 0,
            "circuit_breaker": {"failures": 1000},
        }
    },
    "targets": {
        "cheap": {"client": "up", "model": "m-cheap", "price": {"input_per_mtok": 1, "output_per_mtok": 2}},
        "pricey": {
            "client": "up",
            "model": "m-pricey",
            "price": {"input_per_mtok": 10, "output_per_mtok": 30, "cached_input_per_mtok": 1},
        },
        "spare": {"client": "up", "model": "m-spare", "price": {"input_per_mtok": 5, "output_per_mtok": 5}},
    },
    "routes": {
        "solo": {"type": "passthrough", "target": "cheap", "fallbacks": ["spare"]},
        "pair": {"type": "random", "targets": ["cheap", "pricey"], "weights": [1, 0], "fallbacks": ["spare"]},
    },
}


@dataclass
class Rig:
    """An engine over a scripted backend, with every decision record it wrote."""

    engine: Engine
    backend: ScriptedBackend
    records: list[DecisionRecord] = field(default_factory=list)


@pytest.fixture
def rig() -> Callable[..., Rig]:
    """``rig(script, **config_overrides)`` builds an engine over a :class:`ScriptedBackend`."""

    def make(script: dict[str, list[Script]], **overrides: Any) -> Rig:
        config = {**BASE_CONFIG, **overrides}
        backend = ScriptedBackend(script)
        records: list[DecisionRecord] = []
        engine = build_engine(
            load_config(config, env={}), sinks=[records.append], backend_factory=lambda *_: backend, env={}
        )
        return Rig(engine, backend, records)

    return make
