"""vLLM hidden-state extraction and the embeddings backend against a real fake server on 127.0.0.1
that writes real safetensors files (BF16 hidden states, I64 token ids, flock'd lock files)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from switchyard.clients.features import EmbeddingsClient, HiddenStatesClient  # noqa: E402
from switchyard.features import build_extractor  # noqa: E402
from switchyard.features.pooling import pool  # noqa: E402
from switchyard.protocol.features import FeatureError  # noqa: E402
from switchyard.testing import serve_fake  # noqa: E402
from switchyard.testing.fake_features import FakeFeatureServer, hashed_embedding, tokens  # noqa: E402


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, FakeFeatureServer, Path]]:
    hs_dir = tmp_path_factory.mktemp("hs")
    app = FakeFeatureServer(hidden_states_dir=hs_dir, layers=3, hidden_size=16, lock_hold_s=3.0, stall_s=3.0)
    server = serve_fake(app)
    try:
        yield server, app, hs_dir
    finally:
        server.stop()
        app.close()


def _client(shared: tuple[Any, FakeFeatureServer, Path], **kw: Any) -> HiddenStatesClient:
    server, _, hs_dir = shared
    kw.setdefault("lock_wait_s", 0.5)
    return HiddenStatesClient(f"http://127.0.0.1:{server.port}/v1", "fake-prefill", hs_dir, **kw)


def _leftovers(hs_dir: Path) -> list[str]:
    return sorted(p.name for p in hs_dir.iterdir())


async def test_probe_request_reads_bf16_states_and_deletes_file_and_lock(shared: Any) -> None:
    _, app, hs_dir = shared
    client = _client(shared)
    try:
        states, ids = await client.fetch("Prove that the square root of two is irrational.")
    finally:
        await client.aclose()
    sent = app.requests[-1]
    assert sent["max_tokens"] == 1 and sent["kv_transfer_params"] == {"include_output_tokens": False}
    assert sent["messages"] == [{"role": "user", "content": "Prove that the square root of two is irrational."}]
    path, written, written_ids = app.written[-1]
    assert states.shape == written.shape == (len(written_ids), 3, 16)
    assert states.dtype == np.float32
    # BF16 keeps ~3 significant digits
    assert np.allclose(states, written, rtol=1e-2, atol=1e-2)
    assert np.array_equal(ids, written_ids)
    assert list(ids) == tokens("Prove that the square root of two is irrational.")
    assert not path.exists() and _leftovers(hs_dir) == []


async def test_extractor_pools_layer_major(shared: Any) -> None:
    server, app, hs_dir = shared
    extractor = build_extractor(
        {
            "backend": "vllm_hidden_states",
            "base_url": f"http://127.0.0.1:{server.port}/v1",
            "model": "fake-prefill",
            "hidden_states_dir": str(hs_dir),
            "layers": [4, 8, 12],
            "pooling": ["mean", "last"],
        }
    )
    try:
        x = await extractor.extract(["one two three", "four five"])
    finally:
        await extractor.aclose()
    assert x.shape == (2, 3 * 2 * 16)
    assert extractor.recipe.hidden_size == 16 and extractor.recipe.dim == 96
    assert extractor.recipe.chat_template is True
    fetched = {tuple(ids.tolist()): states for _, states, ids in app.written[-2:]}
    states = fetched[tuple(tokens("one two three"))]
    from switchyard.protocol import tensorfile

    as_bf16, _ = tensorfile.parse(tensorfile.dumps({"h": states}, bf16=frozenset({"h"})))
    assert np.allclose(x[0], pool(as_bf16["h"], ["mean", "last"]), atol=1e-6)
    # layer-major: first block is layer 0 mean, second is layer 0 last token
    assert np.allclose(x[0][16:32], as_bf16["h"][-1, 0], atol=1e-6)


async def test_wrong_layer_count_is_a_feature_error(shared: Any) -> None:
    server, _, hs_dir = shared
    extractor = build_extractor(
        {
            "backend": "vllm_hidden_states",
            "base_url": f"http://127.0.0.1:{server.port}/v1",
            "model": "fake-prefill",
            "hidden_states_dir": str(hs_dir),
            "layers": [1, 2],
        }
    )
    try:
        with pytest.raises(FeatureError, match="dumped 3 layers"):
            await extractor.extract(["x"])
    finally:
        await extractor.aclose()


async def test_lock_held_briefly_is_waited_for(shared: Any) -> None:
    _, _, hs_dir = shared
    client = _client(shared, lock_wait_s=2.0)
    client._clients.get().headers["x-fake-fault"] = "hs-slow-lock"
    try:
        t0 = time.monotonic()
        states, _ = await client.fetch("slow writer")
        assert time.monotonic() - t0 >= 0.1
    finally:
        await client.aclose()
    assert states.shape[1:] == (3, 16)
    assert _leftovers(hs_dir) == []


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("hs-locked", "lock_timeout"),
        ("hs-no-path", "no_path"),
        ("hs-outside-dir", "bad_path"),
        ("hs-not-safetensors", "bad_path"),
        ("hs-missing", "lock_timeout"),
        ("hs-corrupt", "bad_file"),
        ("hs-bad-shape", "shape"),
        ("fail-500", "status"),
    ],
)
async def test_failures_are_typed_bounded_and_leave_no_files(shared: Any, fault: str, reason: str) -> None:
    _, app, hs_dir = shared
    client = _client(shared, lock_wait_s=0.3)
    client._clients.get().headers["x-fake-fault"] = fault
    t0 = time.monotonic()
    try:
        with pytest.raises(FeatureError) as info:
            await client.fetch("anything")
    finally:
        await client.aclose()
        app.close()  # release a held lock now rather than after lock_hold_s
    assert info.value.reason == reason
    assert time.monotonic() - t0 < 2.5
    for leftover in hs_dir.parent.glob("elsewhere-*"):
        leftover.unlink()
    if fault != "hs-outside-dir":
        assert [p for p in _leftovers(hs_dir) if p.endswith(".safetensors")] == []


async def test_timeout_and_refused_connection(shared: Any, tmp_path: Path) -> None:
    client = _client(shared, timeout_s=0.3)
    client._clients.get().headers["x-fake-fault"] = "stall"
    try:
        with pytest.raises(FeatureError) as info:
            await client.fetch("slow")
        assert info.value.reason == "timeout"
    finally:
        await client.aclose()
    dead = HiddenStatesClient("http://127.0.0.1:9/v1", "m", tmp_path, timeout_s=2)
    try:
        with pytest.raises(FeatureError) as info:
            await dead.fetch("x")
        assert info.value.reason == "connect"
    finally:
        await dead.aclose()


async def test_stale_unlocked_files_are_swept(shared: Any) -> None:
    _, _, hs_dir = shared
    old = hs_dir / "orphan.safetensors"
    old.write_bytes(b"x")
    past = time.time() - 3600
    import os

    os.utime(old, (past, past))
    client = _client(shared, stale_after_s=60)
    try:
        await client.fetch("sweep first")
    finally:
        await client.aclose()
    assert not old.exists()


async def test_embeddings_backend(shared: Any) -> None:
    server, _, _ = shared
    extractor = build_extractor(
        {"backend": "embeddings", "base_url": f"http://127.0.0.1:{server.port}/v1", "model": "emb", "batch_size": 2}
    )
    try:
        x = await extractor.extract(["alpha beta", "gamma", "alpha beta"])
    finally:
        await extractor.aclose()
    assert x.shape == (3, 64) and extractor.recipe.hidden_size == 64
    assert np.allclose(x[0], hashed_embedding("alpha beta", 64)) and np.allclose(x[0], x[2])


async def test_embeddings_errors(shared: Any) -> None:
    server, _, _ = shared
    client = EmbeddingsClient(f"http://127.0.0.1:{server.port}/v1", "fail-500")
    try:
        with pytest.raises(FeatureError, match="HTTP 500"):
            await client.embed(["x"])
    finally:
        await client.aclose()
    dead = EmbeddingsClient("http://127.0.0.1:9/v1", "m", timeout_s=2)
    try:
        with pytest.raises(FeatureError) as info:
            await dead.embed(["x"])
        assert info.value.reason == "connect"
    finally:
        await dead.aclose()
