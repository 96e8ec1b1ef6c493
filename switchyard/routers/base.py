"""The router contract: context in, decision out, no I/O.

Layer: ``routers`` — imports ``protocol`` only.

A router decides which target should serve a request. It never performs I/O itself: when it
needs a model (a judge, a weak-first answer) it awaits the injected
:class:`~switchyard.protocol.call.ModelCall`, which the engine serves with fallback and whose
tokens and latency the engine books as routing overhead. Per-session memory goes through
``ctx.store``.

A route in the YAML config is a :class:`RouterSpec` subclass (validated by pydantic); the spec
builds the :class:`Router` once at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, ClassVar, Literal, Protocol, TypedDict

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.features import FeatureFactory
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.session import SessionInfo, StateStore
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.experiment import ExperimentSpec
from switchyard.routers.restrict import RestrictRule
from switchyard.routers.verify import VerifySpec


@dataclass(slots=True)
class RouteContext:
    """What a router knows besides the request.

    Attributes:
        route: The route's name.
        session: Caller identity (session, agent, turn index).
        targets: The route's targets by name, in config order.
        store: Per-session state store (namespaced per route by the engine).
        headers: Caller headers, lower-cased.
        shared: The route-wide state store (namespaced per route, shared by every session and
            every replica), for state that belongs to the route rather than a session (a
            controlled threshold); ``None`` where there is none (offline tools).
    """

    route: str
    session: SessionInfo
    targets: Mapping[str, TargetInfo]
    store: StateStore
    headers: Mapping[str, str] = field(default_factory=dict)
    shared: StateStore | None = None


@dataclass(slots=True)
class Decision:
    """A router's answer.

    Either ``candidates`` (the first is the choice, the rest fallbacks in order) or an
    already-produced ``response`` (the router called a model and that answer stands).

    Attributes:
        candidates: Target names, best first.
        response: A finished answer produced while routing. When it came from the injected
            model call, the engine books that call as the answer, not as routing overhead.
        answered_by: Target that produced ``response``.
        request: A rewritten request (e.g. with a system note); ``None`` keeps the caller's,
            which lets the engine replay the caller's body verbatim to a same-format upstream.
        source: Why: ``passthrough``, ``random``, ``override``, ``dimensions``,
            ``llm-classifier``, ``fail_open``, ``affinity``, ``escalation``, ``latched``,
            ``probe``, ``plan``, ``execute``, ``replan``, ``profile:<route>/<source>``, …
        score: Probability that the capable target is needed, when the router has one.
        confidence: The router's confidence in its choice, when it has one.
        reason: One short human-readable line.
        details: Router-specific facts worth recording (signals, verdict fields).
        abstained: The router had no decisive signal and ``candidates`` are only its own
            default (a stage router falling open, a probe score inside its abstain band, a
            judge without a usable verdict). Alone, a route serves that default; inside a
            ``cascade`` the next stage decides instead (see docs/cascade.md).
    """

    candidates: tuple[str, ...] = ()
    response: ChatResponse | None = None
    answered_by: str | None = None
    request: ChatRequest | None = None
    source: str = "default"
    score: float | None = None
    confidence: float | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    abstained: bool = False


class Router(Protocol):
    """Routing policy for one route."""

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        """Decides who serves ``request``. Must not mutate ``request``."""
        ...


@dataclass(slots=True, frozen=True)
class BuildContext:
    """What a spec gets when it builds its router.

    Attributes:
        route: The route's name.
        targets: Every configured target by name (not only this route's).
        config_dir: Directory of the config file, for relative paths (``None`` for dicts).
        features: Builds a feature extractor from a validated ``features`` block (learned
            routers; injected by ``config`` so routers perform no I/O themselves).
        router_of: The built router of another route, by name (a cascade stage that names a
            route uses that route's router; ``config`` builds each route once).
    """

    route: str
    targets: Mapping[str, TargetInfo]
    config_dir: str | None = None
    features: FeatureFactory | None = None
    router_of: Callable[[str], Router] | None = None


SpecClass = type["RouterSpec"]
"""A router spec class (an alias because specs have a field named ``type``)."""


class Tiers(TypedDict):
    """The two roles of a two-tier route, as target names (see :meth:`RouterSpec.tiers`)."""

    capable: str
    efficient: str


class RouterSpec(BaseModel):
    """Base of every route's config block.

    Subclasses set ``type`` to a ``Literal`` of their name, declare their keys as pydantic
    fields, and implement :meth:`target_refs` and :meth:`build`. Two optional hooks serve offline
    evaluation: :meth:`tiers` (which targets are capable and efficient) and
    :meth:`threshold_key` (which key ``switchyard calibrate`` may set).

    Attributes:
        type: The router kind.
        fallbacks: Extra targets tried, in order, after the route's own targets.
        aliases: Other model ids that select this route (e.g. the names an agent hard-codes).
        description: Free text shown by ``GET /v1/models``.
        context_window: Advertised context window (``/v1/models``).
        fallback_on_auth_error: Fall back to the next candidate when a target answers 401/403
            (default: return the upstream's error, since a bad key rarely fixes itself).
        reply_model: What the ``model`` of this route's replies says: ``requested`` (the id the
            caller sent) or ``upstream`` (the served target's model id); unset: the config's
            top-level ``reply_model``.
        subagents: An inline router spec for sub-agents' delegated calls (see
            docs/subagents.md); validated by ``config`` like a route block.
        restrict: Rules over the request's text (a regex or a built-in detector) that, when
            they match, allow only targets carrying the rule's labels (see
            docs/restrictions.md).
        verify: Checks the efficient target's answers before release and lets the capable
            target answer when one fails (see docs/verify.md).
        experiment: Shadow mode or a control group (see docs/rollout.md).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    kind: ClassVar[str] = ""
    stateful: ClassVar[bool] = False
    """Whether the router keeps per-session state (the engine warns once when sessions are unknown)."""

    type: str
    fallbacks: list[str] = Field(default_factory=list)
    aliases: list[str] = Field(default_factory=list)
    description: str | None = None
    context_window: int | None = Field(default=None, gt=0)
    fallback_on_auth_error: bool = False
    reply_model: Literal["requested", "upstream"] | None = None
    subagents: dict[str, Any] | None = None
    restrict: list[RestrictRule] = Field(default_factory=list)
    verify: VerifySpec | None = None
    experiment: ExperimentSpec | None = None

    _nested: dict[str, RouterSpec] = PrivateAttr(default_factory=dict)

    ROUTE_KEYS: ClassVar[tuple[str, ...]] = (
        "fallbacks",
        "aliases",
        "description",
        "context_window",
        "fallback_on_auth_error",
        "subagents",
        "reply_model",
        "restrict",
        "verify",
        "experiment",
    )
    """Keys that belong to a route, not to a policy: not allowed in an inline router spec."""

    # -- composition (cascade stages, sub-agent policies) ------------------------------------

    def inline_blocks(self) -> list[tuple[str, Mapping[str, Any]]]:
        """Inline router specs inside this block, as ``(yaml sub-path, raw block)``.

        ``config`` validates each like a route block (errors name their full YAML path) and
        hands the result back through :meth:`attach`.
        """
        return [("subagents", self.subagents)] if self.subagents is not None else []

    def route_refs(self) -> list[tuple[str, str]]:
        """Other routes this block names as ``(yaml sub-path, route name)`` (cascade stages)."""
        return []

    def attach(self, sub_path: str, spec: RouterSpec) -> None:
        """Receives the validated spec for an inline block or a named route at ``sub_path``."""
        self._nested[sub_path] = spec

    def nested(self, sub_path: str) -> RouterSpec:
        """The spec attached at ``sub_path`` (``KeyError`` before ``config`` resolved it)."""
        return self._nested[sub_path]

    def subagent_spec(self) -> RouterSpec | None:
        """The validated ``subagents`` policy, if any."""
        return self._nested.get("subagents")

    def checked_target_refs(self) -> list[tuple[str, str]]:
        """Every target reference ``config`` checks under this block's path: its own
        :meth:`target_refs` and those of its ``subagents`` policy (judges included). A cascade
        leaves out the targets of routes it names, which are checked at those routes."""
        return [*self.target_refs(), *self._subagent_refs()]

    def _subagent_refs(self) -> list[tuple[str, str]]:
        sub = self.subagent_spec()
        if sub is None:
            return []
        return [(f"subagents.{path}", t) for path, t in (*sub.checked_target_refs(), *sub.auxiliary_refs())]

    def routable_targets(self) -> list[str]:
        """Every target this route may serve from, in config order: its own, then its
        ``subagents`` policy's (``fallbacks`` excluded; the engine adds them)."""
        names = [t for _, t in self.target_refs()]
        sub = self.subagent_spec()
        if sub is not None:
            names += sub.routable_targets()
        return list(dict.fromkeys(names))

    @classmethod
    def variant_for(cls, block: Mapping[str, Any]) -> SpecClass:
        """The spec class that validates ``block`` (a type with modes picks the mode's class)."""
        return cls

    def target_refs(self) -> list[tuple[str, str]]:
        """Every target the route may serve from, as ``(yaml sub-path, target name)`` in
        config order; ``fallbacks`` excluded (the engine adds them)."""
        raise NotImplementedError

    def auxiliary_refs(self) -> list[tuple[str, str]]:
        """Targets the router calls but never routes to (judges), as ``(sub-path, name)``."""
        return []

    def keeps_state(self) -> bool:
        """Whether this route's own router, as configured, keeps per-session state (default:
        ``stateful``). Router types override it; callers ask :meth:`uses_session_state`."""
        return self.stateful

    def uses_session_state(self) -> bool:
        """Whether serving this route keeps per-session state: its router's, or its
        ``subagents`` policy's (delegated calls are decided by that policy)."""
        sub = self.subagent_spec()
        return self.keeps_state() or (sub is not None and sub.uses_session_state())

    def hashes_first_message(self) -> bool:
        """Whether requests without a session id are keyed by a hash of their first user message."""
        return False

    def build(self, ctx: BuildContext) -> Router:
        """Builds the router."""
        raise NotImplementedError

    # -- optional hooks for offline evaluation (``switchyard eval`` / ``calibrate``) --------------

    def tiers(self) -> Tiers | None:
        """The route's capable and efficient targets, when it chooses between two tiers.

        ``switchyard eval`` reads this to report APGR and CPT without ``--capable/--efficient``
        flags. The default (``None``) means the route declares no tiers.
        """
        return None

    def threshold_key(self) -> str | None:
        """The key of this route's block that holds its decision threshold, if it has one.

        Contract: with that key set to :meth:`threshold_for_score` of ``t``, the router sends a
        request to the capable tier exactly when ``Decision.score >= t`` (requests it decides
        without a score aside), so ``switchyard calibrate`` can choose ``t`` from observed
        scores and write the key into the config. The default (``None``) means the route has
        no threshold to calibrate.
        """
        return None

    def threshold_for_score(self, score_threshold: float) -> float:
        """The value of :meth:`threshold_key` that makes "capable iff ``score >= score_threshold``".

        The default is the score threshold itself; a router whose key is on another scale
        converts here (e.g. a ``p_solve`` threshold for the efficient tier is ``1 - t`` when
        ``score = 1 - p_solve``).
        """
        return score_threshold
