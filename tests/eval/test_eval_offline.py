"""The decide-only engine, the worker pool and the progress bar."""

from __future__ import annotations

import asyncio
import io

import pytest

from switchyard.config.load import load_config
from switchyard.eval.offline import UnavailableBackend, build_offline_engine, chat_request, decide, run_pool
from switchyard.eval.progress import Progress
from switchyard.wire import available_formats

CONFIG = {
    "llm_clients": {
        "local": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"},
        "keyed": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "SY_TEST_NO_SUCH_KEY"},
        "claude": {"format": "anthropic_messages", "base_url": "http://127.0.0.1:9"},
    },
    "targets": {
        "a": {"client": "local", "model": "m-a"},
        "b": {"client": "keyed", "model": "m-b"},
        "c": {"client": "claude", "model": "m-c"},
    },
    "routes": {"r": {"type": "random", "targets": ["a", "b", "c"], "seed": 1}},
}


async def test_offline_engine_starts_without_keys_or_formats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SY_TEST_NO_SUCH_KEY", raising=False)
    offline = build_offline_engine(load_config(CONFIG))
    try:
        assert offline.unavailable["keyed"] == "environment variable SY_TEST_NO_SUCH_KEY is not set"
        if "anthropic_messages" not in available_formats():  # until the Anthropic codec lands
            assert offline.unavailable["claude"] == "format 'anthropic_messages' is not available in this version"
        backend = offline.engine.targets["b"].backend
        assert isinstance(backend, UnavailableBackend)
        decided = await decide(offline.engine, chat_request("r", [{"role": "user", "content": "hi"}]), "s1")
        assert decided.selected in ("a", "b", "c") and decided.skipped is None
        assert decided.source == "random"
        missing = await decide(offline.engine, chat_request("nope", [{"role": "user", "content": "hi"}]), None)
        assert missing.selected is None and missing.skipped is not None and "names no route" in missing.skipped
    finally:
        await offline.aclose()


async def test_run_pool_keeps_input_order_under_concurrency() -> None:
    seen: list[int] = []

    async def work(i: int) -> int:
        await asyncio.sleep(0.001 * (5 - i % 5))  # later items finish first
        return i * i

    out = await run_pool(range(12), work, concurrency=4, on_done=lambda i, r: seen.append(i))
    assert out == [i * i for i in range(12)]
    assert sorted(seen) == list(range(12)) and seen != list(range(12))
    with pytest.raises(ValueError):
        await run_pool([1], work, concurrency=0)


def test_progress_draws_only_when_enabled() -> None:
    buf = io.StringIO()
    with Progress(4, "eval r", stream=buf, enabled=True, width=8) as bar:
        for _ in range(4):
            bar.update()
    text = buf.getvalue()
    assert "\reval r  [########]  4/4  100%" in text and text.endswith("\n")
    assert Progress(10, width=10, enabled=False).render(now=None).startswith("[..........]  0/10")
    plain = io.StringIO()  # not a terminal: plain lines (no carriage returns), a final one at least
    with Progress(3, "x", stream=plain, interval=3600) as bar:
        bar.update(3)
    assert plain.getvalue().startswith("x  [") and "\r" not in plain.getvalue()
    assert plain.getvalue().count("\n") == 1 and "3/3" in plain.getvalue()
    often = io.StringIO()
    with Progress(3, "y", stream=often, interval=0.0) as bar:
        for _ in range(3):
            bar.update()
    assert often.getvalue().count("\n") == 4 and "\x1b" not in often.getvalue()
    off = io.StringIO()
    with Progress(3, "z", stream=off, enabled=False) as bar:
        bar.update(3)
    assert off.getvalue() == ""
    unknown = Progress(None, "replay", enabled=False)
    unknown.update(7)
    assert unknown.render().startswith("replay  7  ")
