"""``type: profiles`` — a per-session choice between named routes (composite profiles).

Layer: ``routers`` — imports ``protocol`` only.

A *chooser* (any router: an ``llm_classifier``, a learned probe …, inline or a route name)
decides once per session, at its first turn and again on the first turn after a context
compaction, which *profile* — a named route, e.g. an efficient-first and a capable-first stage
router — serves the session. The choice is kept in the session state (shared by replicas with
the Redis backend), and every turn's decision is made by that profile's router and names the
profile (source ``profile:<route>/<its source>``, ``details.profile``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import NamespacedStore
from switchyard.routers.base import BuildContext, Decision, RouteContext, Router, RouterSpec
from switchyard.routers.plan_execute.phase import compaction_turn

logger = logging.getLogger("switchyard.routers")

STATE_KEY = "profile"
"""Session-state slot: ``{"profile": <route>, "why": ..., "turn": <turn index>}``."""


class ProfilesRouter:
    """Chooses a profile per session and lets its router decide every turn.

    Args:
        chooser: The router whose choice of target picks the profile.
        profiles: Profile route by the chooser's target.
        routers: Each profile route's router.
        default: The profile when the chooser abstains, fails or picks an unmapped target.
    """

    def __init__(
        self, chooser: Router, profiles: Mapping[str, str], routers: Mapping[str, Router], default: str
    ) -> None:
        self.chooser = chooser
        self.profiles = dict(profiles)
        self.routers = dict(routers)
        self.default = default

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        stored = await ctx.store.get(STATE_KEY)
        known = stored.get("profile") if isinstance(stored, dict) else None
        compacted = compaction_turn(request.messages)
        entry: dict[str, Any]
        if isinstance(known, str) and known in self.routers and not compacted:
            entry = {"name": known, "why": "stored", "chosen_at_turn": stored.get("turn")}  # type: ignore[union-attr]
        else:
            entry = await self._choose(request, ctx, call, "compacted" if compacted else "first_turn")
            kept = {"profile": entry["name"], "why": entry["why"], "turn": ctx.session.turn_index}
            await ctx.store.set(STATE_KEY, kept)
        name = entry["name"]
        inner_ctx = dataclasses.replace(ctx, store=NamespacedStore(ctx.store, f"profile.{name}."))
        decision = await self.routers[name].route(request, inner_ctx, call)
        details = {**decision.details, "profile": entry, "profile_source": decision.source}
        return dataclasses.replace(
            decision,
            source=f"profile:{name}/{decision.source}",
            reason=f"profile {name!r} ({entry['why']}): {decision.reason}",
            details=details,
        )

    async def _choose(self, request: ChatRequest, ctx: RouteContext, call: ModelCall, why: str) -> dict[str, Any]:
        chooser_ctx = dataclasses.replace(ctx, store=NamespacedStore(ctx.store, "chooser."))
        entry: dict[str, Any] = {"why": why}
        try:
            choice = await self.chooser.route(request, chooser_ctx, call)
        except Exception as exc:  # a broken chooser must not fail the turn: the default profile serves
            logger.warning("profile chooser failed (%s: %s); default profile %r", type(exc).__name__, exc, self.default)
            entry.update(name=self.default, chooser_error=f"{type(exc).__name__}: {exc}")
            return entry
        picked = choice.answered_by or (choice.candidates[0] if choice.candidates else None)
        entry.update(chooser_source=choice.source, chooser_pick=picked)
        if choice.score is not None:
            entry["chooser_score"] = choice.score
        if choice.abstained or picked not in self.profiles:
            entry["name"] = self.default
        else:
            entry["name"] = self.profiles[picked]
        return entry


class ProfilesSpec(RouterSpec):
    """``type: profiles`` — the session's profile is chosen once, then its route decides.

    Example::

        agent:
          type: profiles
          choose: {type: llm_classifier, mode: capability, classifier_target: judge,
                   strong_target: capable, weak_target: efficient, base_threshold: 0.5}
          profiles: {efficient: efficient_first, capable: capable_first}
          default: efficient_first

    Attributes:
        choose: The chooser: an inline router spec or a route name. Its chosen target picks
            the profile.
        profiles: For each target the chooser may pick, the route (profile) that serves the
            session.
        default: The profile when the chooser abstains, fails or picks a target not listed.
    """

    kind = "profiles"
    stateful = True
    type: Literal["profiles"]
    choose: str | dict[str, Any]
    profiles: dict[str, str] = Field(min_length=1)
    default: str

    @model_validator(mode="after")
    def _default_is_a_profile(self) -> ProfilesSpec:
        if self.default not in self.profiles.values():
            names = sorted(set(self.profiles.values()))
            raise ValueError(f"default {self.default!r} must be one of the profiles: {names}")
        return self

    # -- composition -----------------------------------------------------------------------

    def inline_blocks(self) -> list[tuple[str, Mapping[str, Any]]]:
        own = [("choose", self.choose)] if isinstance(self.choose, dict) else []
        return [*own, *super().inline_blocks()]

    def route_refs(self) -> list[tuple[str, str]]:
        refs = [("choose", self.choose)] if isinstance(self.choose, str) else []
        return refs + [(f"profiles.{pick}", route) for pick, route in self.profiles.items()]

    def _profile_routes(self) -> list[str]:
        return list(dict.fromkeys(self.profiles.values()))

    def target_refs(self) -> list[tuple[str, str]]:
        refs: list[tuple[str, str]] = []
        for pick in self.profiles:
            spec = self.nested(f"profiles.{pick}")
            refs += [(f"profiles.{pick}", t) for t in spec.routable_targets()]
        return list(dict.fromkeys(refs))

    def checked_target_refs(self) -> list[tuple[str, str]]:
        # The profiles' targets are checked at those routes; the chooser's under its own path.
        return self._subagent_refs()

    def auxiliary_refs(self) -> list[tuple[str, str]]:
        if not isinstance(self.choose, dict):
            return []
        chooser = self.nested("choose")
        return [(f"choose.{p}", t) for p, t in (*chooser.checked_target_refs(), *chooser.auxiliary_refs())]

    def keeps_state(self) -> bool:
        return True

    def build(self, ctx: BuildContext) -> Router:
        if ctx.router_of is None:
            raise ValueError("profiles name routes; build them through switchyard.config")
        chooser = ctx.router_of(self.choose) if isinstance(self.choose, str) else self.nested("choose").build(ctx)
        routers = {route: ctx.router_of(route) for route in self._profile_routes()}
        return ProfilesRouter(chooser, self.profiles, routers, self.default)
