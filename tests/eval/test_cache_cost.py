"""Cache-priced cost of a run (switchyard.eval.cache_cost), pinned on hand-computed cases.

Prices (USD per Mtok): efficient ``e`` input 1, cached 0.1, write 1.25, output 2; capable ``c``
input 10, cached 1, write 12.5, output 20. Turns (input, output tokens): (1000, 100),
(1500, 200), (2500, 300).
"""

from __future__ import annotations

import pytest

from switchyard.eval.cache_cost import (
    CachePrice,
    CostError,
    TurnTokens,
    handover,
    price_turns,
    switched_cost,
    total_tokens,
    turn_tokens,
)
from switchyard.protocol.targets import Price

PRICES = {"e": CachePrice(1.0, 2.0, 0.1, 1.25), "c": CachePrice(10.0, 20.0, 1.0, 12.5)}
TURNS = [TurnTokens(1000, 100), TurnTokens(1500, 200), TurnTokens(2500, 300)]


def test_three_turns_without_a_switch() -> None:
    # turn 1 writes 1000 (1250) + 100 out (200); turn 2 reads 1000 (100), writes 500 (625), 200 out (400);
    # turn 3 reads 1500 (150), writes 1000 (1250), 300 out (600): 4575 micro-USD.
    assert price_turns(TURNS, ["e", "e", "e"], PRICES) == pytest.approx(4575e-6)


def test_a_switch_at_turn_two_pays_the_capable_cache_write_for_the_whole_context() -> None:
    # 1450 on e; turn 2 on c writes all 1500 (18750) + 200 out (4000); turn 3 on c reads 1500 (1500),
    # writes 1000 (12500), 300 out (6000): 44200.
    assert price_turns(TURNS, ["e", "c", "c"], PRICES) == pytest.approx(44200e-6)


def test_a_switch_and_a_switch_back_write_the_whole_context_each_time() -> None:
    # 1450 + 22750, then back on e: all 2500 written again (3125) + 300 out (600): 27925.
    assert price_turns(TURNS, ["e", "c", "e"], PRICES) == pytest.approx(27925e-6)


def test_list_price_is_the_same_rule_without_a_discount() -> None:
    uncached = {m: p.uncached() for m, p in PRICES.items()}
    # (1000 + 200) + (1500 + 400) + (2500 + 600)
    assert price_turns(TURNS, ["e"] * 3, uncached) == pytest.approx(6200e-6)
    assert CachePrice.from_price(Price(input_per_mtok=3, output_per_mtok=15)) == CachePrice(3, 15, 3, 3)


def test_a_handed_over_run_carries_the_efficient_context() -> None:
    capable = [TurnTokens(900, 50), TurnTokens(1300, 80)]
    # k = 2: the efficient turn 1, then the capable run with its first prompt (900) replaced by the
    # efficient context at turn 2 (1500): inputs 1500 and 1900.
    assert handover(TURNS, capable, 2) == [TurnTokens(1000, 100), TurnTokens(1500, 50), TurnTokens(1900, 80)]
    # 1450 + (1500*12.5 + 50*20 = 19750) + (1500*1 + 400*12.5 + 80*20 = 8100)
    assert switched_cost(TURNS, capable, 2, PRICES, ("e", "c")) == pytest.approx(29300e-6)
    # k = 1: nothing handed over, the capable run as recorded: 12250 + 7500.
    assert switched_cost(TURNS, capable, 1, PRICES, ("e", "c")) == pytest.approx(19750e-6)
    with pytest.raises(CostError, match=r"outside 1\.\.3"):
        handover(TURNS, capable, 4)


def test_errors_name_what_is_wrong() -> None:
    with pytest.raises(CostError, match="no price for model 'x'"):
        price_turns(TURNS[:1], ["x"], PRICES)
    with pytest.raises(CostError, match="3 turns but 2 models"):
        price_turns(TURNS, ["e", "e"], PRICES)


def test_turn_tokens_follow_the_provenance_rule() -> None:
    messages = [
        {"role": "system", "content": "abcd"},
        {"role": "user", "content": "12345678"},
        {"role": "assistant", "content": "xy", "tool_calls": [{"function": {"name": "f", "arguments": '{"a":1}'}}]},
        {"role": "tool", "tool_call_id": "1", "content": "result"},
        {"role": "assistant", "content": "done"},
    ]
    # turn 1: 12 chars before, 2 + 1 + 7 = 10 its own; turn 2: 12 + 10 + 6 = 28 before, 4 its own.
    assert turn_tokens(messages) == [TurnTokens(3.0, 2.5), TurnTokens(7.0, 1.0)]
    assert total_tokens(turn_tokens(messages)) == (10, 4)
    # No assistant message: one decision on the whole conversation.
    assert turn_tokens(messages[:2]) == [TurnTokens(3.0, 0.0)]


def test_a_suite_price_is_a_config_price_with_the_list_prices_required() -> None:
    from pydantic import ValidationError

    from switchyard.eval.suite import PriceSpec

    spec = PriceSpec(input_per_mtok=2, output_per_mtok=8, cached_input_per_mtok=0.2)
    assert isinstance(spec, Price) and spec.rates() == (2, 8, 0.2, 2)
    assert CachePrice.from_price(spec) == CachePrice(2, 8, 0.2, 2)
    with pytest.raises(ValidationError, match="output_per_mtok"):
        PriceSpec.model_validate({"input_per_mtok": 1})
    with pytest.raises(ValidationError, match="extra"):
        PriceSpec.model_validate({"input_per_mtok": 1, "output_per_mtok": 1, "per_call": 1})
