"""The stage router: the agent's tool activity picks the tier, with no model call of its own.

Layer: ``routers`` — imports ``protocol`` only.

Per turn: extract signals → signal cascade (override → tests passed → scorer above threshold) →
for an ambiguous turn the optional classifier → otherwise the picker's default tier
(``fall_open``). Then, with a session, hysteresis may keep the previous tier for a few turns
(``hold``), and the request sent upstream may carry a handoff note and a per-tier system prompt.
The caller's request is never mutated: a rewrite is returned as ``Decision.request``.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from dataclasses import field
from typing import Any, Literal

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.messages import Message, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.stage.classifier import TierVerdict, TurnClassifier
from switchyard.routers.stage.prefix import Known, PrefixCache, conversation_key
from switchyard.routers.stage.runrules import Fired, RunRules, Tally, check, tally_from
from switchyard.routers.stage.scorer import Picker, Tier, Verdict, pick
from switchyard.routers.stage.signals import (
    DEFAULT_PROFILE,
    NVIDIA_PROFILE,
    Aggregates,
    Profile,
    Readings,
    Signals,
    details_of,
    read_from,
)
from switchyard.routers.stage.tables import ToolKind

logger = logging.getLogger("switchyard.routers.stage")

STATE_KEY = "stage"
HARD_SOURCES = frozenset(("override", "tests_passed", "persistent_errors", "turn_budget"))
"""Sources strong enough to end a hold early."""
_SIGNAL_SOURCES = frozenset(("override", "dimensions", "persistent_errors", "turn_budget"))
"""Escalations the signals made (a classifier's call is not one of them)."""


@dataclass(slots=True, frozen=True)
class HandoffNotes:
    """Notes telling the model that takes over why it got the turn.

    Attributes:
        escalation: Appended when a turn goes to the capable tier.
        deescalation: Appended when a turn goes back to the efficient tier.
        only_on_signal_escalation: Escalation notes only for ``override``/``dimensions``
            turns, never for a classifier's call.
        when: ``switch`` — only on the turn the tier changes (needs a session; without one
            every decided turn gets its note); ``every_turn`` — every decided turn (NVIDIA).
    """

    escalation: str | None = None
    deescalation: str | None = None
    only_on_signal_escalation: bool = True
    when: Literal["switch", "every_turn"] = "switch"


@dataclass(slots=True, frozen=True)
class StageConfig:
    """Everything a :class:`StageRouter` needs.

    Attributes:
        capable: Target of the capable tier.
        efficient: Target of the efficient tier.
        picker: Default tier of undecided turns (``efficient_first`` or ``capable_first``).
        threshold: Confidence the scorer must exceed to decide on its own.
        window: Recent tool calls/results the windowed signals look at.
        semantics: Extra tool names (lower-case) and their kinds.
        notes: Handoff notes, if any.
        capable_system_prompt: System message put first when the capable tier serves.
        efficient_system_prompt: System message put first when the efficient tier serves.
        hold: Turns to keep a tier after switching to it, per tier.
        compat: ``nvidia`` reproduces nemo-switchyard 0.3.0's decisions.
        run_rules: Run-level rules (persistent errors, a turn budget); ``None``: none.
    """

    capable: str
    efficient: str
    picker: Picker = "efficient_first"
    threshold: float = 0.5
    window: int = 3
    semantics: Mapping[str, ToolKind] = field(default_factory=dict)
    notes: HandoffNotes | None = None
    capable_system_prompt: str | None = None
    efficient_system_prompt: str | None = None
    hold: Mapping[str, int] = field(default_factory=dict)
    compat: Literal["none", "nvidia"] = "none"
    run_rules: RunRules | None = None

    @property
    def stateful(self) -> bool:
        """Whether decisions depend on the session's previous turns."""
        return any(self.hold.values()) or (self.notes is not None and self.notes.when == "switch")


@dataclass(slots=True, frozen=True)
class Behaviour:
    """The points where the default behaviour and ``compat: nvidia`` part ways.

    Attributes:
        profile: Signal extraction (vocabulary, turn depth).
        tests_shortcut: Passing tests after code changes send the turn to the efficient tier.
        ceiling_fix: ``capable_first`` measures efficient-side confidence against its ceiling.
        f32: Severities in 32-bit floats, as NVIDIA keeps them.
    """

    profile: Profile = DEFAULT_PROFILE
    tests_shortcut: bool = True
    ceiling_fix: bool = True
    f32: bool = False

    @classmethod
    def of(cls, compat: str) -> Behaviour:
        """The behaviour a ``compat`` setting stands for."""
        if compat == "nvidia":
            return cls(profile=NVIDIA_PROFILE, tests_shortcut=False, ceiling_fix=False, f32=True)
        return cls()


@dataclass(slots=True)
class _Outcome:
    tier: Tier
    source: str
    confidence: float | None
    p_capable: float
    reason: str


class StageRouter:
    """Routes each turn by what the agent's tools have been doing.

    Args:
        config: The route's settings.
        classifier: Consulted for ambiguous turns only; ``None`` falls open to the picker.
        behaviour: Fine-grained compatibility switches (default: as ``config.compat`` says);
            the differential check flips them one at a time to explain each difference.
    """

    def __init__(
        self, config: StageConfig, classifier: TurnClassifier | None = None, *, behaviour: Behaviour | None = None
    ) -> None:
        self.config = config
        self.classifier = classifier
        self.behaviour = behaviour or Behaviour.of(config.compat)
        self._semantics = dict(config.semantics)
        self._prefixes: PrefixCache[Aggregates] = PrefixCache()
        rules = config.run_rules
        self._rules = rules if rules is not None and rules.active else None
        self._tallies: PrefixCache[Tally] = PrefixCache()
        self._targets = {"capable": config.capable, "efficient": config.efficient}
        self._default: Tier = "capable" if config.picker == "capable_first" else "efficient"
        self._stateful = config.stateful
        self._may_rewrite = (
            config.notes is not None
            or config.capable_system_prompt is not None
            or config.efficient_system_prompt is not None
        )

    def signals(self, request: ChatRequest, session_key: str | None = None) -> Signals:
        """The signals this router reads off ``request``.

        Args:
            request: The request.
            session_key: With a session, the whole-conversation counts continue from the
                session's previous request (see :mod:`switchyard.routers.stage.prefix`).
        """
        return Signals(*self._read(request, session_key, {}))

    def _read(self, request: ChatRequest, key: Hashable | None, known: Known) -> Readings:
        messages = request.messages
        cached = key is not None and key != ""
        prefix = self._prefixes.lookup(key, messages, known) if cached else None
        readings, agg = read_from(
            messages, prefix, window=self.config.window, semantics=self._semantics, profile=self.behaviour.profile
        )
        if cached:
            self._prefixes.store(key, messages, agg, known)
        return readings

    def _run_rule(
        self, request: ChatRequest, key: Hashable | None, known: Known, rules: RunRules
    ) -> tuple[Fired | None, Tally]:
        """The run-level rule that fires for ``request``, if any, and the run's counts (they
        continue per session)."""
        messages = request.messages
        cached = key is not None and key != ""
        prefix = self._tallies.lookup(key, messages, known) if cached else None
        tally = tally_from(messages, prefix, rules, self.behaviour.profile)
        if cached:
            self._tallies.store(key, messages, tally, known)
        return check(tally, rules), tally

    def verdict(self, signals: Signals | Readings) -> Verdict:
        """What the signal cascade alone decides for ``signals``."""
        return pick(
            signals,
            picker=self.config.picker,
            threshold=self.config.threshold,
            tests_shortcut=self.behaviour.tests_shortcut,
            ceiling_fix=self.behaviour.ceiling_fix,
            f32=self.behaviour.f32,
        )

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        known: Known = {}  # message fingerprints, shared by the cache key, check and store
        key = ctx.session.key or conversation_key(request, known)
        readings = self._read(request, key, known)
        verdict = self.verdict(readings)
        tally: Tally | None = None
        if self._rules is not None and verdict.source != "override":
            fired, tally = self._run_rule(request, key, known, self._rules)
            if fired is not None:
                verdict = Verdict("capable", fired.source, verdict.score, 1.0, fired.reason)
        details: dict[str, Any] = {
            "signals": details_of(readings),
            "scorer_score": verdict.score,
            "threshold": self.config.threshold,
            "picker": self.config.picker,
        }
        if tally is not None:
            # With the signals, what `switchyard tune --decision-log` needs to replay this turn
            # exactly under another confidence_threshold, repeats or turn_budget.
            details["run_tally"] = {"turns": tally.turns, "errors": dict(tally.classes)}
        if verdict.tier is not None:
            outcome = _Outcome(verdict.tier, verdict.source, verdict.confidence, verdict.p_capable, verdict.reason)
        else:
            outcome = await self._resolve_ambiguous(request, Signals(*readings), verdict, ctx, call, details)
        previous = await self._remember(outcome, ctx, details) if self._stateful else None
        rewritten = self._rewrite(request, outcome, previous, ctx) if self._may_rewrite else None
        chosen = self._targets[outcome.tier]
        other = self._targets["efficient" if outcome.tier == "capable" else "capable"]
        details["tier"] = outcome.tier
        return Decision(
            candidates=(chosen, other),
            request=rewritten,
            source=outcome.source,
            score=outcome.p_capable,
            confidence=outcome.confidence,
            reason=outcome.reason,
            details=details,
            # No decisive signal and no classifier verdict: the picker's default is no decision
            # of this router's own (a cascade asks its next stage).
            abstained=outcome.source == "fall_open",
        )

    async def _resolve_ambiguous(
        self,
        request: ChatRequest,
        sig: Signals,
        verdict: Verdict,
        ctx: RouteContext,
        call: ModelCall,
        details: dict[str, Any],
    ) -> _Outcome:
        judged = await self._consult(request, sig, ctx, call, details)
        if judged is not None:
            p = judged.p_capable if judged.p_capable is not None else verdict.p_capable
            details["classifier"] = judged.details
            return _Outcome(judged.tier, "llm-classifier", judged.confidence, p, judged.reason or "classifier")
        return _Outcome(
            self._default,
            "fall_open",
            verdict.confidence,
            verdict.p_capable,
            f"{verdict.reason}; default {self._default}",
        )

    async def _consult(
        self, request: ChatRequest, sig: Signals, ctx: RouteContext, call: ModelCall, details: dict[str, Any]
    ) -> TierVerdict | None:
        if self.classifier is None:
            return None
        try:
            return await self.classifier.classify(request, sig, ctx, call)
        except Exception as exc:  # fail open: a broken judge must not fail the turn
            logger.warning("stage router %r: classifier failed (%s); falling open", ctx.route, exc)
            details["classifier_error"] = f"{type(exc).__name__}: {exc}"
            return None

    async def _remember(self, outcome: _Outcome, ctx: RouteContext, details: dict[str, Any]) -> Tier | None:
        """Applies the hold and stores this turn's tier; returns the previous turn's tier.

        State is ``{tier, left, turn, previous, left_before}``; ``turn`` is the number of
        assistant messages, so a retried request (same turn) is judged exactly like the first
        attempt instead of counting down the hold twice.
        """
        if ctx.session.key is None:
            return None
        turn = ctx.session.turn_index
        wanted = outcome.tier
        # What the last call of ``step`` saw: ``step`` is an atomic read-modify-write of the
        # stored state (so two turns of a session on two replicas cannot lose a countdown step),
        # and it may run more than once when the store retries, so it only records here.
        seen: dict[str, Any] = {}

        def step(stored: dict[str, Any] | None) -> dict[str, Any]:
            state = stored or {}
            if turn == state.get("turn"):
                previous, left = _tier(state.get("previous")), int(state.get("left_before", 0))
            else:
                previous, left = _tier(state.get("tier")), int(state.get("left", 0))
            left_before = left
            tier = wanted
            held = previous is not None and previous != wanted and left > 0 and outcome.source not in HARD_SOURCES
            if held:
                assert previous is not None
                tier = previous
            left = self.config.hold.get(tier, 0) if previous not in (None, tier) else max(0, left - 1)
            seen.update(previous=previous, held=held, left_before=left_before, left=left, tier=tier)
            return {"tier": tier, "left": left, "turn": turn, "previous": previous, "left_before": left_before}

        await ctx.store.update(STATE_KEY, step)
        previous: Tier | None = seen["previous"]
        if seen["held"]:
            details["held_from"] = {"tier": outcome.tier, "source": outcome.source}
            signals = f"signals said {outcome.tier} ({outcome.source})"
            outcome.reason = f"holding {previous} ({seen['left_before']} more turn(s)); {signals}"
            outcome.tier, outcome.source = seen["tier"], "hold"
        details["hold_left"] = seen["left"]
        return previous

    def _rewrite(
        self, request: ChatRequest, outcome: _Outcome, previous: Tier | None, ctx: RouteContext
    ) -> ChatRequest | None:
        note = self._note(outcome, previous, ctx)
        prompt = self.config.capable_system_prompt if outcome.tier == "capable" else self.config.efficient_system_prompt
        if note is None and prompt is None:
            return None
        messages = list(request.messages)
        if note is not None:
            last = messages[-1] if messages else None
            if last is not None and last.role == "user":
                messages[-1] = last.model_copy(update={"content": [*last.content, TextPart(text=note)]})
            else:
                messages.append(Message.of("user", note))
        if prompt is not None:
            messages.insert(0, Message.of("system", prompt))
        return request.model_copy(update={"messages": messages})

    def _note(self, outcome: _Outcome, previous: Tier | None, ctx: RouteContext) -> str | None:
        notes = self.config.notes
        if notes is None or outcome.source in ("fall_open", "hold"):
            return None
        # With a session, "switch" notes only a real handoff; without one a switch cannot be
        # told from a stay, so every decided turn carries its note (NVIDIA's behaviour).
        if notes.when == "switch" and ctx.session.key is not None and previous in (None, outcome.tier):
            return None
        if outcome.tier == "capable":
            if notes.only_on_signal_escalation and outcome.source not in _SIGNAL_SOURCES:
                return None
            return notes.escalation
        return notes.deescalation


def _tier(value: object) -> Tier | None:
    if value == "capable":
        return "capable"
    if value == "efficient":
        return "efficient"
    return None
