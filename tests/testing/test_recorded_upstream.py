"""The recorded-runs upstream (issue 48's simulated deployment): it answers the served model's
recorded next message with that turn's usage, and a session served through it costs what the
agent suite's latch counterfactual says (docs/agent-suite.md)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from switchyard.eval.cache_cost import CachePrice, price_turns, switched_cost, turn_tokens
from switchyard.protocol.targets import Price
from switchyard.server.runner import AppThread
from switchyard.testing.recorded import RecordedRun, RecordedUpstream
from switchyard.wire.openai_chat.response import decode_usage

E, C = "small-model", "big-model"
PRICES = {E: CachePrice(0.5, 2.0, 0.05, 0.6), C: CachePrice(3.0, 15.0, 0.3, 3.75)}


def run(tag: str, turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix it."},
    ]
    for i in range(turns - 1):
        call = {
            "id": f"{tag}{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": f'{{"cmd": "ls {i}"}}'},
        }
        msgs.append({"role": "assistant", "content": f"{tag} step {i} " + "plan " * 200, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"{tag}{i}", "content": f"output {i} " * (500 + 300 * i)})
    msgs.append({"role": "assistant", "content": f"{tag} done"})
    return msgs


EFF, CAP = run("e", 5), run("c", 3)


def upstream() -> RecordedUpstream:
    return RecordedUpstream({"s1": RecordedRun(EFF, CAP), "s2": RecordedRun(EFF)}, efficient_model=E, capable_model=C)


def assistant(msgs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    return [m for m in msgs if m["role"] == "assistant"][n]


def before(msgs: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    idx = [i for i, m in enumerate(msgs) if m["role"] == "assistant"][n]
    return msgs[:idx]


def cost(model: str, usage: dict[str, Any]) -> float:
    p = PRICES[model]
    price = Price(
        input_per_mtok=p.input,
        output_per_mtok=p.output,
        cached_input_per_mtok=p.cached_input,
        cache_write_per_mtok=p.cache_write,
    )
    return price.cost(decode_usage(usage))  # as serve reads and prices the answer


@pytest.mark.parametrize("k", [1, 2, 4])
def test_a_session_switched_at_k_is_answered_from_the_recordings_and_costs_the_suites_value(k: int) -> None:
    up = upstream()
    total, turn = 0.0, 0
    # the efficient run up to the switch, then the capable run continued from the efficient context
    while turn < k - 1:
        status, body = up.answer({"model": E, "user": "s1", "messages": before(EFF, turn)})
        assert status == 200 and body["choices"][0]["message"]["content"] == assistant(EFF, turn)["content"]
        assert body["choices"][0]["message"]["tool_calls"] == assistant(EFF, turn)["tool_calls"]
        total += cost(E, body["usage"])
        turn += 1
    head = before(EFF, k - 1) if k > 1 else before(CAP, 0)
    for j in range(3):
        messages = head + before(CAP, j)[len(before(CAP, 0)) :]
        status, body = up.answer({"model": C, "user": "s1", "messages": messages})
        assert status == 200 and body["choices"][0]["message"]["content"] == assistant(CAP, j)["content"]
        total += cost(C, body["usage"])
    assert up.switch_of("s1") == k - 1
    expected = switched_cost(turn_tokens(EFF), turn_tokens(CAP), k, PRICES, (E, C))
    assert total == pytest.approx(expected, rel=1e-3)  # tokens are whole numbers on the wire


def test_never_switched_costs_the_efficient_run_and_a_stand_in_run_goes_on_after_a_switch() -> None:
    up = upstream()
    total = 0.0
    for turn in range(5):
        _, body = up.answer({"model": E if turn < 2 else C, "user": "s2", "messages": before(EFF, turn)})
        assert body["choices"][0]["message"]["content"] == assistant(EFF, turn)["content"]  # no capable run: same run
        total += cost(E if turn < 2 else C, body["usage"])
    assert total == pytest.approx(price_turns(turn_tokens(EFF), [E, E, C, C, C], PRICES), rel=1e-3)
    # a request for the efficient model after the switch is answered from the continuation, and counted
    assert up.answer({"model": E, "user": "s2", "messages": before(EFF, 4)})[0] == 200 and up.unlatched == 1


def test_what_it_cannot_answer_is_a_clear_error() -> None:
    up = upstream()
    assert up.answer({"model": E, "user": "nobody", "messages": []})[1]["error"]["param"] == "user"
    assert up.answer({"model": "other", "user": "s1", "messages": []})[0] == 404
    status, body = up.answer({"model": E, "user": "s1", "messages": EFF})
    assert status == 400 and "past the end" in body["error"]["message"]


def test_it_speaks_http() -> None:
    with AppThread(upstream()) as srv:
        ok = httpx.post(f"{srv.base_url}/chat/completions", json={"model": E, "user": "s1", "messages": before(EFF, 0)})
        streamed = httpx.post(
            f"{srv.base_url}/chat/completions", json={"model": E, "user": "s1", "stream": True, "messages": []}
        )
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"].startswith("e step 0 plan")
    assert streamed.status_code == 400 and streamed.json()["error"]["param"] == "stream"
