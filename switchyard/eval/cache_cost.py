"""Cache-priced cost of an agent run, turn by turn, and of a run handed to another model.

Layer: ``eval``. Pure arithmetic: no engine, no I/O, no third-party imports.

A run is a list of :class:`TurnTokens`, one per assistant message: ``input`` the tokens of the
conversation before it, ``output`` the tokens of the message itself. Token counts are estimated
from the messages by the rule the AgentDojo data's PROVENANCE.md states for its totals
(characters / 4; a message's characters are its text plus, per tool call, the function name and
the JSON arguments), so the per-turn estimates add up to the recorded ``input_tokens_est`` and
``output_tokens_est`` (up to their final rounding up).

Prompt caching, as agents such as Claude Code and Codex use it (the cache breakpoint at the end of
every request), prices turn ``i`` served by model ``m``:

- the first turn, or a turn whose model differs from the previous turn's (a **switch**: caches are
  per model): the whole context ``input_i`` is written to ``m``'s cache at its cache-write price;
- otherwise the previous turn's context ``input_{i-1}`` is read from cache at the cached-input
  price and the new part ``input_i - input_{i-1}`` (the previous answer and the tool results) is
  written at the cache-write price;
- the output at the output price.

A switch back pays the whole context again (cache lifetimes are not modelled: a provider's cache
of the earlier prefix may still be warm, so this errs towards charging a switch). With
``cached = write = input`` the rule is plain list pricing of every prompt token.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from switchyard._dataclass import dataclass

if TYPE_CHECKING:  # a type only: this module stays free of pydantic
    from switchyard.protocol.targets import Price

CHARS_PER_TOKEN = 4.0
"""The estimation rule's tokenizer stand-in (AgentDojo PROVENANCE.md: characters / 4)."""


class CostError(ValueError):
    """A run cannot be priced (unknown model, mismatched lengths); the message says which."""


@dataclass(frozen=True, slots=True)
class TurnTokens:
    """One assistant turn's estimated tokens.

    Attributes:
        input: Tokens of the conversation before the turn (the request's prompt).
        output: Tokens the turn generated.
    """

    input: float
    output: float


@dataclass(frozen=True, slots=True)
class CachePrice:
    """USD per million tokens, with prompt caching: a config ``price:``
    (:class:`~switchyard.protocol.targets.Price`) with its defaults applied, as plain floats for
    the replay's per-turn arithmetic (:meth:`from_price`).

    Attributes:
        input: Uncached prompt tokens (list price).
        output: Generated tokens.
        cached_input: Prompt tokens read from cache.
        cache_write: Prompt tokens written to cache.
    """

    input: float
    output: float
    cached_input: float
    cache_write: float

    @classmethod
    def from_price(cls, price: Price) -> CachePrice:
        """``price`` resolved (:meth:`Price.rates <switchyard.protocol.targets.Price.rates>`:
        a missing cache price is the input price)."""
        return cls(*price.rates())

    def uncached(self) -> CachePrice:
        """The same price without caching: every prompt token at the input price."""
        return CachePrice(self.input, self.output, self.input, self.input)


def message_chars(message: Mapping[str, Any]) -> int:
    """Characters of one chat message: its text plus each tool call's name and JSON arguments."""
    content = message.get("content")
    if isinstance(content, str):
        n = len(content)
    elif isinstance(content, list):  # content parts: count the text ones
        n = sum(len(p.get("text") or "") for p in content if isinstance(p, Mapping))
    else:
        n = 0
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        if isinstance(fn, Mapping):
            n += len(fn.get("name") or "")
            args = fn.get("arguments")
            n += len(args) if isinstance(args, str) else 0
    return n


def turn_tokens(messages: Sequence[Mapping[str, Any]]) -> list[TurnTokens]:
    """Per assistant message, the estimated input (all messages before it) and output tokens.

    A conversation without assistant messages has one turn: its whole text as input, no output
    (the decision the replay makes on it).
    """
    out: list[TurnTokens] = []
    before = 0
    for m in messages:
        chars = message_chars(m)
        if m.get("role") == "assistant":
            out.append(TurnTokens(before / CHARS_PER_TOKEN, chars / CHARS_PER_TOKEN))
        before += chars
    return out or [TurnTokens(before / CHARS_PER_TOKEN, 0.0)]


def price_turns(turns: Sequence[TurnTokens], models: Sequence[str], prices: Mapping[str, CachePrice]) -> float:
    """USD of ``turns``, turn ``i`` served by ``models[i]``, with prompt caching (module doc).

    Raises:
        CostError: Different lengths, or a model without a price.
    """
    if len(turns) != len(models):
        raise CostError(f"{len(turns)} turns but {len(models)} models")
    total = 0.0
    prev_model: str | None = None
    prev_input = 0.0
    for t, model in zip(turns, models, strict=True):
        p = prices.get(model)
        if p is None:
            raise CostError(f"no price for model {model!r}")
        if model != prev_model:
            usd = t.input * p.cache_write
        else:
            # The cached prefix cannot be longer than this prompt (a trimmed context reads less).
            cached = min(prev_input, t.input)
            usd = cached * p.cached_input + (t.input - cached) * p.cache_write
        total += usd + t.output * p.output
        prev_model, prev_input = model, t.input
    return total / 1_000_000


def handover(efficient: Sequence[TurnTokens], capable: Sequence[TurnTokens], k: int) -> list[TurnTokens]:
    """The turns of a run handed to the capable model at turn ``k`` (1-based).

    The efficient run's turns ``1 .. k-1``, then the capable model's own recorded turns, each
    carrying the efficient run's context at turn ``k`` in place of the capable run's first prompt
    (``input'_j - input'_1 + input_k``): the capable model continues the conversation it was
    handed, doing the work of its own run. At ``k = 1`` nothing is handed over: the capable run
    as recorded.

    Raises:
        CostError: ``k`` outside ``1 .. len(efficient)``, or an empty capable run.
    """
    if not 1 <= k <= len(efficient):
        raise CostError(f"switch turn {k} outside 1..{len(efficient)}")
    if not capable:
        raise CostError("the capable run has no turns")
    if k == 1:
        return list(capable)
    offset = efficient[k - 1].input - capable[0].input
    return [*efficient[: k - 1], *(TurnTokens(max(0.0, t.input + offset), t.output) for t in capable)]


def switched_cost(
    efficient: Sequence[TurnTokens],
    capable: Sequence[TurnTokens],
    k: int,
    prices: Mapping[str, CachePrice],
    models: tuple[str, str],
) -> float:
    """USD of the efficient run switched to the capable model at turn ``k`` (:func:`handover`).

    ``models`` is ``(efficient, capable)``, the keys of ``prices``. The switch pays the capable
    model's cache write for the whole context at turn ``k``.

    Raises:
        CostError: As :func:`handover` and :func:`price_turns`.
    """
    turns = handover(efficient, capable, k)
    n_eff = 0 if k == 1 else k - 1
    tiers = [models[0]] * n_eff + [models[1]] * (len(turns) - n_eff)
    return price_turns(turns, tiers, prices)


def total_tokens(turns: Sequence[TurnTokens]) -> tuple[int, int]:
    """``(input, output)`` totals rounded up, as the data's ``*_tokens_est`` fields."""
    return math.ceil(sum(t.input for t in turns) - 1e-9), math.ceil(sum(t.output for t in turns) - 1e-9)


__all__ = [
    "CHARS_PER_TOKEN",
    "CachePrice",
    "CostError",
    "TurnTokens",
    "handover",
    "message_chars",
    "price_turns",
    "switched_cost",
    "total_tokens",
    "turn_tokens",
]
