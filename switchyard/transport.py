"""In-process HTTP transports: an SDK client's requests go straight to :meth:`Switchyard.dispatch`.

Layer: ``transport`` — imports ``api``; the HTTP library is imported lazily.

Both HTTP-library families are supported: ``httpx2`` (current ``openai``/``anthropic`` SDKs) and
``httpx`` (older SDK releases). Streams are handed over chunk by chunk as the engine produces
them — unlike ``httpx.ASGITransport``, which buffers whole bodies.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Iterator
from functools import cache
from types import ModuleType
from typing import Any

from switchyard.api import Switchyard
from switchyard.engine.reply import Reply


def family_of(sdk_module: str) -> str:
    """Which HTTP library an SDK's client is built on: ``"httpx2"`` or ``"httpx"``."""
    base = importlib.import_module(f"{sdk_module}._base_client")
    return "httpx2" if "httpx2" in vars(base) else "httpx"


@cache
def _classes(family: str) -> tuple[type[Any], type[Any]]:
    mod: ModuleType = importlib.import_module(family)

    class _AsyncStream(mod.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, chunks: AsyncIterator[bytes]) -> None:
            self._chunks = chunks

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._chunks:
                yield chunk

        async def aclose(self) -> None:
            aclose = getattr(self._chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    class _SyncStream(mod.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, sy: Switchyard, chunks: AsyncIterator[bytes]) -> None:
            self._iter = sy.iterate_sync(chunks)

        def __iter__(self) -> Iterator[bytes]:
            yield from self._iter

        def close(self) -> None:
            close = getattr(self._iter, "close", None)
            if close is not None:
                close()

    def response(reply: Reply, stream: Any) -> Any:
        if stream is not None:
            return mod.Response(reply.status, headers=reply.headers, stream=stream)
        return mod.Response(reply.status, headers=reply.headers, content=reply.body)

    class AsyncEngineTransport(mod.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        """Async transport calling the engine in the caller's event loop."""

        def __init__(self, sy: Switchyard) -> None:
            self.switchyard = sy

        async def handle_async_request(self, request: Any) -> Any:
            body = await request.aread()
            reply = await self.switchyard.dispatch(request.method, _target(request.url), body, request.headers)
            return response(reply, _AsyncStream(reply.stream) if reply.stream is not None else None)

    class SyncEngineTransport(mod.BaseTransport):  # type: ignore[name-defined,misc]
        """Sync transport running the engine on the Switchyard's private loop thread."""

        def __init__(self, sy: Switchyard) -> None:
            self.switchyard = sy

        def handle_request(self, request: Any) -> Any:
            body = request.read()
            headers = dict(request.headers)
            path = _target(request.url)
            reply = self.switchyard.run_sync(self.switchyard.dispatch(request.method, path, body, headers))
            stream = _SyncStream(self.switchyard, reply.stream) if reply.stream is not None else None
            return response(reply, stream)

    return AsyncEngineTransport, SyncEngineTransport


def _target(url: Any) -> str:
    """Path and query of an ``httpx``/``httpx2`` URL (``GET /health?deep=1`` needs the query)."""
    query = url.query
    return f"{url.path}?{query.decode('ascii', 'replace')}" if query else str(url.path)


def async_transport(sy: Switchyard, family: str = "httpx2") -> Any:
    """An async transport of ``family`` (``httpx2`` or ``httpx``) over ``sy``."""
    return _classes(family)[0](sy)


def sync_transport(sy: Switchyard, family: str = "httpx2") -> Any:
    """A sync transport of ``family`` over ``sy``."""
    return _classes(family)[1](sy)
