"""Fetching features over HTTP: vLLM prefill hidden states and ``/v1/embeddings``.

Layer: ``clients`` — the only layer that speaks HTTP; numpy is imported lazily.

:class:`HiddenStatesClient` drives a vLLM instance started with the ``extract_hidden_states``
speculative method and the hidden-states KV connector: one chat request with ``max_tokens: 1``
and ``kv_transfer_params`` makes vLLM prefill the prompt and dump the residual stream of the
configured layers to a safetensors file (``hidden_states`` ``[prompt_tokens, layers, hidden]``
plus ``token_ids``); the answer names the file in ``kv_transfer_params.hidden_states_path``.
The client accepts only ``.safetensors`` paths inside the configured directory, waits a bounded
time for a shared lock on the companion ``.lock`` file (the writer holds it exclusively while
writing), reads the file, and deletes file and lock whatever happened. Every failure is a
:class:`~switchyard.protocol.features.FeatureError`; nothing waits without a limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
import weakref
from pathlib import Path
from typing import Any

import httpx
import orjson

from switchyard.protocol import tensorfile
from switchyard.protocol.features import FeatureError

_SWEEP_EVERY_S = 60.0


class _PerLoop:
    """One ``httpx.AsyncClient`` per event loop: routers (and so their extractors) are shared by
    the engines of several loops (the server's, the sync API's), and a pool must stay in its loop."""

    def __init__(self, api_key: str | None, timeout_s: float, transport: httpx.AsyncBaseTransport | None) -> None:
        self._headers = _headers(api_key)
        self._timeout = timeout_s
        self._transport = transport
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = httpx.AsyncClient(
                transport=self._transport,
                headers=self._headers,
                timeout=httpx.Timeout(self._timeout),
                follow_redirects=False,
            )
        return client

    async def aclose(self) -> None:
        """Closes the running loop's client."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


async def _post_json(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], timeout_s: float, what: str
) -> dict[str, Any]:
    """POSTs ``body`` and returns the JSON object answer, or raises :class:`FeatureError`."""
    try:
        async with asyncio.timeout(timeout_s):
            resp = await client.post(url, content=orjson.dumps(body))
    except TimeoutError:
        raise FeatureError(f"{what}: no answer from {url} within {timeout_s}s", reason="timeout") from None
    except httpx.TimeoutException as exc:
        raise FeatureError(f"{what}: {url} timed out ({type(exc).__name__})", reason="timeout") from None
    except httpx.HTTPError as exc:
        raise FeatureError(f"{what}: cannot reach {url}: {type(exc).__name__}: {exc}", reason="connect") from None
    if resp.status_code >= 400:
        text = resp.content[:300].decode("utf-8", errors="replace").strip()
        raise FeatureError(f"{what}: {url} answered HTTP {resp.status_code}: {text}", reason="status")
    try:
        data = orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        raise FeatureError(f"{what}: {url} sent invalid JSON", reason="protocol") from None
    if not isinstance(data, dict):
        raise FeatureError(f"{what}: {url} sent a non-object body", reason="protocol")
    return data


class HiddenStatesClient:
    """Prefill hidden states from a vLLM instance with the hidden-states connector.

    Args:
        base_url: The instance's OpenAI-compatible root (``http://host:8001/v1``).
        model: Model id served there.
        hidden_states_dir: The connector's ``shared_storage_path`` as this process sees it.
        api_key: Bearer token, if the instance wants one.
        timeout_s: Limit on the probe request.
        lock_wait_s: Longest wait for the writer's lock.
        poll_s: Interval between lock (and file) checks.
        stale_after_s: Unlocked leftovers older than this are deleted by a periodic sweep.
        transport: An ``httpx`` transport to use instead of the network (tests).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        hidden_states_dir: str | Path,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        lock_wait_s: float = 1.0,
        poll_s: float = 0.05,
        stale_after_s: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        self.dir = Path(hidden_states_dir).resolve()
        self.timeout_s = timeout_s
        self.lock_wait_s = lock_wait_s
        self.poll_s = poll_s
        self.stale_after_s = stale_after_s
        self._last_sweep = 0.0
        self._clients = _PerLoop(api_key, timeout_s, transport)

    def probe_body(self, text: str) -> dict[str, Any]:
        """The chat request that makes vLLM dump the prompt's hidden states."""
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": text}],
            "max_tokens": 1,
            "temperature": 0,
            "stream": False,
            "kv_transfer_params": {"include_output_tokens": False},
        }

    async def fetch(self, text: str) -> tuple[Any, Any]:
        """Prefills ``text`` and returns ``(hidden_states, token_ids)``.

        Returns:
            ``hidden_states`` as ``float32`` ``[prompt_tokens, layers, hidden]``; ``token_ids``
            as ``int64`` ``[prompt_tokens]`` or ``None`` when the file has none.

        Raises:
            FeatureError: The request failed, the answer names no usable file, the lock was not
                released in time, or the file is malformed.
        """
        self._maybe_sweep()
        data = await _post_json(
            self._clients.get(), self.url, self.probe_body(text), self.timeout_s, "hidden-state probe"
        )
        path = self._path_from(data)
        try:
            await self._wait_unlocked(path)
            try:
                tensors, _ = await asyncio.to_thread(tensorfile.load, path)
            except FileNotFoundError:
                raise FeatureError(f"hidden-state file {path} does not exist", reason="missing_file") from None
            except (OSError, tensorfile.TensorFileError) as exc:
                raise FeatureError(f"hidden-state file unreadable: {exc}", reason="bad_file") from None
        finally:
            self._remove(path)
        return self._validate(tensors, path)

    def _path_from(self, data: dict[str, Any]) -> Path:
        params = data.get("kv_transfer_params")
        raw = params.get("hidden_states_path") if isinstance(params, dict) else None
        if not isinstance(raw, str) or not raw:
            raise FeatureError(
                "vLLM answered without kv_transfer_params.hidden_states_path; is it started with the "
                "extract_hidden_states speculative method and the hidden-states KV connector?",
                reason="no_path",
            )
        path = Path(raw)
        if path.suffix != ".safetensors":
            raise FeatureError(f"refusing hidden-state path {raw!r}: not a .safetensors file", reason="bad_path")
        resolved = path.resolve()
        if not resolved.is_relative_to(self.dir):
            raise FeatureError(
                f"refusing hidden-state path {raw!r}: outside hidden_states_dir {self.dir} "
                "(mount the connector's directory at the same path in both processes)",
                reason="bad_path",
            )
        return resolved

    @staticmethod
    def _lock_paths(path: Path) -> list[Path]:
        return [path.with_name(path.name + ".lock"), path.with_suffix(".lock")]

    async def _wait_unlocked(self, path: Path) -> None:
        """Waits until the file exists and no writer holds its lock, at most ``lock_wait_s``."""
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            if path.exists() and all(self._free(lock) for lock in self._lock_paths(path)):
                return
            if time.monotonic() >= deadline:
                state = "still locked by its writer" if path.exists() else "never appeared"
                raise FeatureError(
                    f"hidden-state file {path.name} {state} after {self.lock_wait_s}s", reason="lock_timeout"
                )
            await asyncio.sleep(self.poll_s)

    @staticmethod
    def _free(lock: Path) -> bool:
        """Whether a shared lock on ``lock`` can be taken now (a missing lock file is free)."""
        try:
            fd = os.open(lock, os.O_RDONLY)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)  # closing drops our shared lock
        return True

    def _remove(self, path: Path) -> None:
        for p in (path, *self._lock_paths(path)):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def _maybe_sweep(self) -> None:
        """Deletes unlocked leftovers older than ``stale_after_s`` (at most once a minute)."""
        now = time.monotonic()
        if now - self._last_sweep < _SWEEP_EVERY_S:
            return
        self._last_sweep = now
        cutoff = time.time() - self.stale_after_s
        try:
            entries = list(self.dir.glob("*.safetensors"))
        except OSError:
            return
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.stat().st_mtime < cutoff and all(self._free(lock) for lock in self._lock_paths(entry)):
                    self._remove(entry)

    @staticmethod
    def _validate(tensors: dict[str, Any], path: Path) -> tuple[Any, Any]:
        import numpy as np

        states = tensors.get("hidden_states")
        if states is None:
            raise FeatureError(f"{path.name}: no 'hidden_states' tensor (has {sorted(tensors)})", reason="bad_file")
        if states.ndim != 3 or states.shape[0] == 0:
            raise FeatureError(
                f"{path.name}: hidden_states shape {list(states.shape)}, expected [prompt_tokens, layers, hidden]",
                reason="shape",
            )
        states = states.astype(np.float32, copy=False)
        if not np.isfinite(states).all():
            raise FeatureError(f"{path.name}: hidden_states holds NaN or inf", reason="bad_file")
        ids = tensors.get("token_ids")
        if ids is not None:
            ids = ids.reshape(-1).astype(np.int64, copy=False)
            if ids.shape[0] != states.shape[0]:
                raise FeatureError(
                    f"{path.name}: {ids.shape[0]} token_ids for {states.shape[0]} hidden-state rows", reason="shape"
                )
        return states, ids

    async def aclose(self) -> None:
        """Closes the running loop's pooled connections."""
        await self._clients.aclose()


class EmbeddingsClient:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint.

    Args:
        base_url: Root URL (``http://host:8002/v1``).
        model: Embedding model id.
        api_key: Bearer token.
        dimensions: Requested output width (sent only when set).
        timeout_s: Limit per request.
        transport: An ``httpx`` transport to use instead of the network (tests).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/embeddings") else base + "/embeddings"
        self.model = model
        self.dimensions = dimensions
        self.timeout_s = timeout_s
        self._clients = _PerLoop(api_key, timeout_s, transport)

    async def embed(self, texts: list[str]) -> Any:
        """Returns ``float32`` ``[len(texts), dim]`` in input order.

        Raises:
            FeatureError: The request failed or the answer is malformed.
        """
        import numpy as np

        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        data = await _post_json(self._clients.get(), self.url, body, self.timeout_s, "embeddings")
        items = data.get("data")
        if not isinstance(items, list) or len(items) != len(texts):
            got = len(items) if isinstance(items, list) else "no"
            raise FeatureError(f"embeddings: expected {len(texts)} vectors, got {got}", reason="protocol")
        rows: list[Any] = [None] * len(texts)
        for pos, item in enumerate(items):
            index = item.get("index", pos) if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(texts) or not isinstance(vector, list):
                raise FeatureError("embeddings: malformed data item (need index and a float list)", reason="protocol")
            rows[index] = vector
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError):
            raise FeatureError("embeddings: vectors differ in length or are not numbers", reason="protocol") from None
        if matrix.ndim != 2 or not np.isfinite(matrix).all():
            raise FeatureError("embeddings: vectors are ragged or not finite", reason="protocol")
        return matrix

    async def aclose(self) -> None:
        """Closes the running loop's pooled connections."""
        await self._clients.aclose()
