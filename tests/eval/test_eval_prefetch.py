"""``switchyard eval`` with a router that prefetches: every item's text goes to it in one call
ahead of the decisions, and each item's messages are decoded once, for both."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import ScoreRouter, config_text, write_jsonl

from switchyard.config.load import load_config
from switchyard.eval import evaluate
from switchyard.eval.dataset import Dataset
from switchyard.protocol.request import ChatRequest

ROUTE = "  scored: {type: test_score, capable: capable, efficient: efficient, threshold: 0.5}\n"
OUTCOMES = {"strong-m": {"correct": True, "cost_usd": 2.0}, "weak-m": {"correct": False, "cost_usd": 0.1}}


async def test_each_item_is_decoded_once_for_the_prefetch_and_its_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefetched: list[list[str]] = []

    async def prefetch(self: ScoreRouter, texts: Sequence[str]) -> int:
        prefetched.append(list(texts))
        return len(texts)

    def text_of(self: ScoreRouter, request: ChatRequest) -> str:
        return request.last_user_text()

    monkeypatch.setattr(ScoreRouter, "prefetch", prefetch, raising=False)
    monkeypatch.setattr(ScoreRouter, "text_of", text_of, raising=False)
    decoded: list[str] = []
    real = evaluate.chat_request

    def counted(route: str, messages: list[dict[str, Any]], **extra: Any) -> ChatRequest:
        decoded.append(messages[-1]["content"])
        return real(route, messages, **extra)

    monkeypatch.setattr(evaluate, "chat_request", counted)
    prompts = ["score=0.9 hard", "score=0.1 easy", "score=0.7 middling"]
    rows = [{"id": f"i{n}", "prompt": p, "models": OUTCOMES} for n, p in enumerate(prompts)]
    rows.append({"id": "bare", "models": OUTCOMES})  # no prompt: an empty user message
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTE))
    dataset = Dataset(write_jsonl(tmp_path / "items.jsonl", rows))
    result = await evaluate.run_eval(load_config(cfg), "scored", dataset, progress=False, concurrency=2)
    assert prefetched == [[*prompts, ""]]
    assert sorted(decoded) == sorted([*prompts, ""])  # once each, not once more per decision
    assert result.row.n == 4
    assert any("1 item(s) have no prompt or messages" in note for note in result.notes)
