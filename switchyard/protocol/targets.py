"""Targets: a named model on an upstream, with its price.

Layer: ``protocol`` — imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat

from switchyard.protocol.response import Usage


class Price(BaseModel):
    """USD per million tokens.

    Attributes:
        input_per_mtok: Uncached prompt tokens.
        output_per_mtok: Generated tokens (reasoning included).
        cached_input_per_mtok: Prompt tokens read from cache; defaults to ``input_per_mtok``.
        cache_write_per_mtok: Prompt tokens written to cache; defaults to ``input_per_mtok``.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    input_per_mtok: NonNegativeFloat = 0.0
    output_per_mtok: NonNegativeFloat = 0.0
    cached_input_per_mtok: NonNegativeFloat | None = None
    cache_write_per_mtok: NonNegativeFloat | None = None

    @property
    def list_per_mtok(self) -> float:
        """Input plus output price: the one number targets are ordered by when a tier is inferred
        from prices (``switchyard eval``'s tiers, a decision-model route's cheapest target)."""
        return self.input_per_mtok + self.output_per_mtok

    def rates(self) -> tuple[float, float, float, float]:
        """``(input, output, cached input, cache write)`` USD per million tokens, a missing cache
        price at the input price (no caching discount): the one place that default is applied."""
        inp = self.input_per_mtok
        cached = inp if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        write = inp if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        return inp, self.output_per_mtok, cached, write

    def cost(self, usage: Usage) -> float:
        """USD cost of ``usage`` at this price."""
        inp, out, cached, write = self.rates()
        total = (
            usage.uncached_input_tokens * inp
            + usage.cache_read_tokens * cached
            + usage.cache_creation_tokens * write
            + usage.output_tokens * out
        )
        return total / 1_000_000


class TargetInfo(BaseModel):
    """What routers and clients know about a target.

    Attributes:
        name: The target's name in the config.
        model: The upstream model id sent to the provider.
        client: Name of the upstream client (``llm_clients`` entry).
        format: Wire format the upstream speaks.
        price: Token prices.
        extra_body: Fields shallow-merged into every upstream request body (request keys win).
        context_window: Tokens the model accepts, when known.
        max_output_tokens: Most tokens the model may generate in one answer, when configured;
            larger requested caps are clamped (see ``switchyard.clients.limits``).
        labels: What the target is (``onprem``, ``eu`` …): a restricted request may be served
            only by targets carrying every label it requires (see docs/restrictions.md).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str
    model: str
    client: str = ""
    format: str = "openai_chat"
    price: Price = Field(default_factory=Price)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    context_window: int | None = None
    max_output_tokens: int | None = None
    labels: frozenset[str] = frozenset()
