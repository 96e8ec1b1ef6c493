"""The trajectory router: at every turn, the estimated gain of switching to the capable model now.

Layer: ``routers`` — imports ``protocol`` only; pure Python per decision.

Per turn: the session's feature tally is brought up to date (only the new messages are read;
:mod:`switchyard.routers.trajectory.features`), the checkpoint's ensemble estimates the gain
(P(capable resolves, efficient does not) - P(the reverse)) with an interval, the price of acting
is computed (the capable model's cache write of the whole context, plus the capable-vs-efficient
price of a run as long again), and the run switches when the gain — net of that price when the
route values a resolved task in USD — reaches the threshold. The threshold is a number or is
held online at a ``target_capable_share`` by the learned routers' controller. Once a session
switches it stays on the capable model (a latch): the recorded runs only tell what a switch is
worth for the rest of a run. Optional run-level rules of the stage router (persistent errors, a
turn budget) switch too, whatever the estimate says.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.learned.control import Observation
from switchyard.routers.learned.sync import SharedControl
from switchyard.routers.stage.prefix import Known, PrefixCache, conversation_key
from switchyard.routers.stage.runrules import RunRules, check, tally_from
from switchyard.routers.stage.runrules import Tally as RuleTally
from switchyard.routers.trajectory.features import Tally, advance, vector
from switchyard.routers.trajectory.model import Estimate, TrajectoryModel

STATE_KEY = "trajectory"


@dataclass(slots=True, frozen=True)
class Prices:
    """USD per million tokens of the two targets, as the switch price needs them.

    Attributes:
        capable_write: The capable target's cache-write price (its input price when unset).
        capable_read: The capable target's cached-input price (its input price when unset).
        capable_out: The capable target's output price.
        efficient_read: The efficient target's cached-input price.
        efficient_out: The efficient target's output price.
    """

    capable_write: float = 0.0
    capable_read: float = 0.0
    capable_out: float = 0.0
    efficient_read: float = 0.0
    efficient_out: float = 0.0


@dataclass(slots=True, frozen=True)
class TrajectoryConfig:
    """What a :class:`TrajectoryRouter` needs.

    Attributes:
        capable: The capable target.
        efficient: The efficient target.
        threshold: Fixed gain threshold (used when there is no controller).
        value_per_task_usd: USD a resolved task is worth; set, the gain is taken net of the
            switch price divided by it.
        output_tokens: Output tokens a turn is assumed to produce (switch price).
        latch: Stay on the capable target once switched.
        run_rules: The stage router's run-level rules that switch on their own (``None``: none).
        per_cost: Score the gain per unit of the capable model's predicted relative cost on the
            task (the checkpoint's cost head) instead of the gain itself.
    """

    capable: str
    efficient: str
    threshold: float = 0.15
    value_per_task_usd: float | None = None
    output_tokens: int = 400
    latch: bool = True
    run_rules: RunRules | None = None
    per_cost: bool = False


def switch_price(tally: Tally, prices: Prices, output_tokens: int) -> float:
    """USD of switching now: the capable model writes the whole context to its cache, and a run as
    long again (as many turns as so far, at least one) costs the capable price instead of the
    efficient one, reading that context from cache."""
    tokens = tally.chars / 4.0
    turns = max(tally.turns, 1)
    per_turn = tokens * (prices.capable_read - prices.efficient_read) + output_tokens * (
        prices.capable_out - prices.efficient_out
    )
    return (tokens * prices.capable_write + turns * per_turn) / 1e6


class TrajectoryRouter:
    """Switches a run to the capable target when the estimated gain is worth it.

    Args:
        config: The route's settings.
        model: The loaded checkpoint.
        prices: The targets' prices.
        control: The live threshold controller of a ``threshold: {target_capable_share: ...}`` route.
        clock: Wall-clock seconds (the controller's timestamps; tests inject one).
    """

    def __init__(
        self,
        config: TrajectoryConfig,
        model: TrajectoryModel,
        prices: Prices = Prices(),
        control: SharedControl | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.model = model
        self.prices = prices
        self.control = control
        self._clock = clock
        self._tallies: PrefixCache[Tally] = PrefixCache()
        self._rule_tallies: PrefixCache[RuleTally] = PrefixCache()

    def tally(self, request: ChatRequest, key: Hashable | None, known: Known | None = None) -> Tally:
        """The feature tally of ``request``'s conversation (continuing the session's last one)."""
        messages = request.messages
        cached = key is not None and key != ""
        prefix = self._tallies.lookup(key, messages, known) if cached else None
        tally = advance(prefix, messages, self.model.dims)
        if cached:
            self._tallies.store(key, messages, tally, known)
        return tally

    def estimate(self, tally: Tally) -> Estimate:
        """The checkpoint's estimate for a tally."""
        return self.model.estimate(vector(tally, self.model.dims))

    def threshold(self) -> float:
        """The threshold of the next decision (the controller's, else the fixed one)."""
        return self.config.threshold if self.control is None else self.control.controller.threshold()

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        known: Known = {}
        session = ctx.session.key
        key = session or conversation_key(request, known)
        if self.config.latch and session is not None:
            state = await ctx.store.get(STATE_KEY)
            if isinstance(state, dict) and state.get("latched"):
                decision = Decision(
                    candidates=(self.config.capable, self.config.efficient),
                    source="latched",
                    score=1.0,
                    reason=f"switched at turn {state.get('turn')} ({state.get('source')}); stays on the capable model",
                    details={"latched": state},
                )
                return await self._book(decision, ctx, 1.0, True)
        tally = self.tally(request, key, known)
        est = self.estimate(tally)
        price = switch_price(tally, self.prices, self.config.output_tokens)
        value = self.config.value_per_task_usd
        gain = est.gain / est.rel_cost if self.config.per_cost else est.gain
        net = gain - (price / value if value else 0.0)
        threshold = self.threshold()
        details: dict[str, Any] = {
            "gain": round(est.gain, 6),
            "gain_interval": [round(est.low, 6), round(est.high, 6)],
            "p_gain": round(est.p_gain, 6),
            "p_loss": round(est.p_loss, 6),
            "rel_cost": round(est.rel_cost, 6),
            "switch_usd": round(price, 8),
            "net_gain": round(net, 6),
            "threshold": round(threshold, 6),
            "turn": tally.turns,
            "context_tokens": int(tally.chars / 4),
        }
        source, reason = "trajectory", f"gain {est.gain:+.3f} [{est.low:+.3f}, {est.high:+.3f}]"
        if self.config.per_cost:
            reason += f" / relative cost {est.rel_cost:.2f} = {gain:+.3f}"
        if value:
            reason += f", net of switch ${price:.4f} at ${value:g}/task {net:+.3f}"
        switch = net >= threshold
        reason += f" {'>=' if switch else '<'} threshold {threshold:.3f}"
        rules = self.config.run_rules
        if not switch and rules is not None:
            fired = self._rule(request, key, known, rules)
            if fired is not None:
                switch, source, reason = True, fired.source, f"{fired.reason}; {reason}"
        if switch and self.config.latch and session is not None:
            latched = {"latched": True, "turn": tally.turns, "source": source, "gain": round(est.gain, 6)}
            await ctx.store.set(STATE_KEY, latched)
        chosen = (
            (self.config.capable, self.config.efficient) if switch else (self.config.efficient, self.config.capable)
        )
        decision = Decision(
            candidates=chosen,
            source=source,
            score=net,
            confidence=None,
            reason=reason,
            details=details,
        )
        return await self._book(decision, ctx, net, switch)

    def _rule(self, request: ChatRequest, key: Hashable | None, known: Known, rules: RunRules) -> Any:
        messages = request.messages
        cached = key is not None and key != ""
        prefix = self._rule_tallies.lookup(key, messages, known) if cached else None
        tally = tally_from(messages, prefix, rules)
        if cached:
            self._rule_tallies.store(key, messages, tally, known)
        return check(tally, rules)

    async def _book(self, decision: Decision, ctx: RouteContext, score: float, capable: bool) -> Decision:
        """Feeds the decision to the threshold controller. A latched turn counts as a capable call
        scored above any threshold, so the share the controller holds is the share of calls."""
        control = self.control
        if control is None:
            return decision
        now = self._clock()
        control.book(Observation(now, score, capable))
        if ctx.shared is not None and control.due(now):
            await control.sync(ctx.shared, now)
        decision.details["control"] = control.state()
        return decision

    def control_state(self) -> dict[str, Any] | None:
        """The threshold controller's state (``None`` for a fixed threshold)."""
        return None if self.control is None else self.control.state()
