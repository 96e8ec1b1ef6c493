"""A fake feature server for tests: vLLM's hidden-state dump and an embeddings endpoint.

A real ASGI app (serve it with :func:`switchyard.testing.serve_fake`) that behaves like

* a vLLM instance started with the ``extract_hidden_states`` speculative method and the
  hidden-states KV connector: a ``/v1/chat/completions`` request carrying ``kv_transfer_params``
  makes it "prefill" the prompt, write a real safetensors file with ``hidden_states``
  ``[prompt_tokens, layers, hidden]`` (BF16 or F32) and ``token_ids`` (I64) into its directory
  while holding an exclusive ``flock`` on the companion ``<file>.lock``, and answer with
  ``kv_transfer_params.hidden_states_path``;
* an OpenAI-compatible ``/v1/embeddings`` endpoint whose vectors are a deterministic hashed
  bag of words (so texts sharing words are near each other and a tiny probe can learn from
  them).

Faults, chosen by the ``x-fake-fault`` header or by a model name equal to the fault, are listed
in :data:`FEATURE_FAULTS`.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import field
from pathlib import Path
from typing import Any

import orjson

from switchyard._dataclass import dataclass
from switchyard.protocol import tensorfile
from switchyard.testing.fake_common import http_body
from switchyard.testing.fake_upstream import last_user_text

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

FEATURE_FAULTS = {
    "hs-no-path": "answer without kv_transfer_params (connector not configured)",
    "hs-outside-dir": "name a file outside the shared directory",
    "hs-not-safetensors": "name a .bin file",
    "hs-missing": "name a file that is never written",
    "hs-corrupt": "write a file that is not safetensors",
    "hs-bad-shape": "write hidden_states as a 2-D tensor",
    "hs-locked": "keep the writer's lock for lock_hold_s seconds after answering",
    "hs-slow-lock": "keep the writer's lock for 0.2 s after answering, then release it",
    "fail-500": "answer 500",
    "stall": "wait stall_s seconds before answering",
}

_WORD = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[int]:
    """The fake tokenizer: chat-template markers around lower-cased words, hashed to ids."""
    words = ["<|user|>", *_WORD.findall(text.lower()), "<|assistant|>"]
    return [zlib.crc32(w.encode()) % 50_000 for w in words]


def hashed_embedding(text: str, dim: int) -> list[float]:
    """A deterministic, L2-normalised bag-of-words vector (word hash → bucket, sign)."""
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        h = zlib.crc32(word.encode())
        vec[h % dim] += 1.0 if (h >> 16) & 1 else -1.0
    norm = sum(v * v for v in vec) ** 0.5 or 1.0
    return [v / norm for v in vec]


@dataclass(slots=True)
class FakeFeatureServer:
    """The ASGI app.

    Attributes:
        hidden_states_dir: Where dumps are written (the connector's ``shared_storage_path``).
        layers: Number of captured layers.
        hidden_size: Width of each state.
        bf16: Store ``hidden_states`` as BF16 (like a bf16 model) rather than F32.
        embedding_dim: Width of ``/v1/embeddings`` vectors.
        lock_hold_s: How long ``hs-locked`` keeps the lock.
        stall_s: How long ``stall`` waits.
        written: Every ``(path, hidden_states, token_ids)`` written, for assertions.
        requests: Every request body received.
    """

    hidden_states_dir: Path
    layers: int = 3
    hidden_size: int = 16
    bf16: bool = True
    embedding_dim: int = 64
    lock_hold_s: float = 3.0
    stall_s: float = 5.0
    written: list[tuple[Path, Any, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _timers: list[threading.Timer] = field(default_factory=list)
    _held: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def states(self, ids: list[int]) -> Any:
        """The deterministic ``[tokens, layers, hidden]`` states of a token sequence."""
        import numpy as np

        out = np.empty((len(ids), self.layers, self.hidden_size), dtype=np.float32)
        for i, t in enumerate(ids):
            rng = np.random.default_rng(t)
            out[i] = rng.standard_normal((self.layers, self.hidden_size)).astype(np.float32) * (1 + 0.01 * i)
        return out

    def release(self, fd: int) -> None:
        """Drops the writer's lock ``fd`` (once)."""
        with self._lock:
            if fd not in self._held:
                return
            self._held.discard(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def close(self) -> None:
        """Cancels pending lock releases and releases every lock still held."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        for fd in list(self._held):
            self.release(fd)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await http_body(scope, receive, send, self.close)
        if body is None:
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            request = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            await _json(send, 400, {"error": {"message": "bad json", "type": "BadRequestError"}})
            return
        self.requests.append(request)
        fault = headers.get("x-fake-fault") or (
            request.get("model") if request.get("model") in FEATURE_FAULTS else None
        )
        if fault == "fail-500":
            await _json(send, 500, {"error": {"message": "internal failure", "type": "InternalServerError"}})
            return
        if fault == "stall":
            import asyncio

            await asyncio.sleep(self.stall_s)
        path = scope["path"]
        if path.endswith("/embeddings"):
            await self._embeddings(send, request)
        elif path.endswith("/chat/completions"):
            await self._probe(send, request, fault)
        else:
            await _json(send, 404, {"error": {"message": f"no route {path}", "type": "NotFoundError"}})

    async def _embeddings(self, send: Send, request: dict[str, Any]) -> None:
        raw = request.get("input")
        texts = [raw] if isinstance(raw, str) else list(raw or [])
        dim = int(request.get("dimensions") or self.embedding_dim)
        data = [
            {"object": "embedding", "index": i, "embedding": hashed_embedding(str(t), dim)} for i, t in enumerate(texts)
        ]
        usage = {"prompt_tokens": sum(len(str(t).split()) for t in texts), "total_tokens": 0}
        await _json(send, 200, {"object": "list", "data": data, "model": request.get("model"), "usage": usage})

    async def _probe(self, send: Send, request: dict[str, Any], fault: str | None) -> None:
        import numpy as np

        n = next(self._ids)
        answer: dict[str, Any] = {
            "id": f"cmpl-probe{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "."}, "finish_reason": "length"}],
        }
        ids = tokens(last_user_text(request))
        answer["usage"] = {"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1}
        if "kv_transfer_params" not in request or fault == "hs-no-path":
            await _json(send, 200, answer)
            return
        directory = Path(self.hidden_states_dir)
        target = directory / f"req-{n}.safetensors"
        if fault == "hs-outside-dir":
            target = directory.parent / f"elsewhere-{n}.safetensors"
        elif fault == "hs-not-safetensors":
            target = directory / f"req-{n}.bin"
        answer["kv_transfer_params"] = {"hidden_states_path": str(target)}
        if fault == "hs-missing":
            await _json(send, 200, answer)
            return
        states = self.states(ids)
        token_ids = np.asarray(ids, dtype=np.int64)
        lock = target.with_name(target.name + ".lock")
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        with self._lock:
            self._held.add(fd)
        try:
            if fault == "hs-corrupt":
                target.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not a header at all")
            elif fault == "hs-bad-shape":
                target.write_bytes(tensorfile.dumps({"hidden_states": states[:, 0, :], "token_ids": token_ids}))
            else:
                data = tensorfile.dumps(
                    {"hidden_states": states, "token_ids": token_ids},
                    bf16=frozenset({"hidden_states"}) if self.bf16 else frozenset(),
                )
                target.write_bytes(data)
            self.written.append((target, states, token_ids))
        finally:
            hold = {"hs-locked": self.lock_hold_s, "hs-slow-lock": 0.2}.get(fault or "")
            if hold:
                timer = threading.Timer(hold, self.release, args=(fd,))
                timer.daemon = True
                self._timers.append(timer)
                timer.start()
            else:
                self.release(fd)
        await _json(send, 200, answer)


async def _json(send: Send, status: int, payload: Any) -> None:
    body = orjson.dumps(payload)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
