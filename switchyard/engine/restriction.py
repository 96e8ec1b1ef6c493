"""Target restrictions: which targets may see one request, and the error when none may.

Layer: ``engine`` — imports ``protocol`` and ``routers.restrict`` (the rule models).

A request's required labels are the union of four sources:

* the header ``x-switchyard-require`` (comma-separated labels, all required; repeated header
  lines add up);
* the inbound API key's ``require_labels`` (``server.api_keys[i]``, put in a context variable by
  the proxy's guard: :data:`switchyard.protocol.access.required_labels`);
* the route's ``restrict:`` rules that match the request's text — everything a target would
  receive (:mod:`switchyard.routers.restrict_text`);
* for an Anthropic thread's ``continue``, the labels the thread required so far
  (:mod:`switchyard.engine.threads` keeps them with the thread): a continued conversation keeps
  the strictest restriction it ever had.

A target is *eligible* when it carries every required label. The engine computes the
restriction once per request (:func:`restriction_for`) and enforces it at the two places every
model call passes through: the answer call's candidate list and the router's model calls
(judges, advisors, classifiers, weak-first answers), and, as a last line, in the fallback
runner itself, so no path — router choice, fallbacks, context-window fallback, a sub-agent
policy, a cascade stage — can reach a forbidden target. Requests without any requirement pay
one header lookup and one context-variable read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.access import required_labels
from switchyard.protocol.errors import UpstreamError
from switchyard.protocol.redact import MASK
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import Decision
from switchyard.routers.restrict import RestrictPolicy, parse_labels

HEADER_REQUIRE = "x-switchyard-require"
"""Request header naming labels (comma-separated) every serving target must carry."""


class RestrictedError(UpstreamError):
    """No eligible target can serve the request, or a router's model call (403).

    An :class:`~switchyard.protocol.errors.UpstreamError` so that a router whose judge,
    advisor or weak-first call is refused degrades as it does when that call fails (falls
    open, lets the other tier serve) — without the call ever being made.
    """

    status = 403
    type = "permission_error"
    code = "no_eligible_target"
    fallback_ok = False


@dataclass(frozen=True, slots=True)
class Requirement:
    """One source of required labels.

    Attributes:
        source: ``header``, ``api_key``, ``route`` or ``thread``.
        name: The header's name, the key's name, the rule's name or the id of the thread's
            message a ``continue`` continues.
        labels: What it requires.
        matches: For route rules: how many matches the rule found (never what it matched).
    """

    source: str
    name: str
    labels: tuple[str, ...]
    matches: int | None = None

    def describe(self) -> str:
        """One phrase for an error message."""
        what = {"header": "header", "api_key": "API key", "route": "route rule", "thread": "thread"}[self.source]
        return f"{what} {self.name!r} requires {', '.join(self.labels)}"

    def to_dict(self) -> dict[str, Any]:
        """The requirement as a decision-record entry."""
        out: dict[str, Any] = {"source": self.source, "name": self.name, "labels": list(self.labels)}
        if self.matches is not None:
            out["matches"] = self.matches
        return out


@dataclass(slots=True)
class Restriction:
    """The labels one request requires and what that leaves of the configured targets.

    Attributes:
        requirements: Where each required label came from.
        labels: Every required label.
        allowed: Names of the eligible targets.
        removed: Targets the route could have used (own targets, fallbacks, judges) that the
            restriction removed, in config order.
        refused: Router model calls refused because none of their targets was eligible.
        redact: Replaces what the matching route rules matched in a text (``None``: no rule
            matched): previews of the request go through it.
    """

    requirements: list[Requirement]
    labels: frozenset[str]
    allowed: frozenset[str]
    removed: list[str] = field(default_factory=list)
    refused: list[list[str]] = field(default_factory=list)
    redact: Callable[[str], str] | None = None

    def permits(self, name: str) -> bool:
        """Whether target ``name`` may serve or see this request."""
        return name in self.allowed

    def keep(self, names: Iterable[str]) -> list[str]:
        """``names`` without the forbidden ones, order kept."""
        return [n for n in names if n in self.allowed]

    def describe(self) -> str:
        """Which restrictions apply, for an error message."""
        return "; ".join(r.describe() for r in self.requirements)

    def error(self, route: str, removed: Iterable[str], what: str = "serve it") -> RestrictedError:
        """The error for a request (or router call) that no eligible target can serve."""
        gone = ", ".join(dict.fromkeys(removed)) or "(none)"
        labels = ", ".join(sorted(self.labels))
        return RestrictedError(
            f"no target of route {route!r} carrying the label(s) {labels} may {what} "
            f"({self.describe()}); removed by the restriction: {gone}"
        )

    def narrow(self, route: str, decision: Decision, candidates: list[str], record: DecisionRecord) -> list[str]:
        """The answer call's candidates without the forbidden ones, noted in ``record``.

        Raises:
            RestrictedError: None is left (and the router produced no answer), or the router's
                answer came from a forbidden target.
        """
        kept = self.keep(candidates)
        entry = self.to_dict()
        if decision.candidates and not self.permits(decision.candidates[0]):
            entry["overridden"] = decision.candidates[0]  # the router's own choice was forbidden
        record.details["restriction"] = entry
        record.candidates = kept
        if decision.response is not None:
            by = decision.answered_by or (candidates[0] if candidates else "")
            if not self.permits(by):
                # Router calls are filtered (RouterCall), so this cannot happen; were a router
                # ever to produce an answer some other way, it must not reach the caller.
                raise self.error(route, [by])
        elif not kept:
            raise self.error(route, candidates)
        return kept

    def to_dict(self) -> dict[str, Any]:
        """The restriction as the decision record's ``details.restriction``."""
        out: dict[str, Any] = {
            "require": sorted(self.labels),
            "by": [r.to_dict() for r in self.requirements],
            "removed": list(self.removed),
        }
        if self.refused:
            out["refused_calls"] = [list(names) for names in self.refused]
        return out


def requirements_for(
    request: ChatRequest,
    headers: Mapping[str, str],
    policy: RestrictPolicy | None,
    body: dict[str, Any] | None = None,
    carried: Sequence[Requirement] = (),
) -> list[Requirement]:
    """Every requirement that applies to ``request`` (empty: unrestricted).

    Args:
        request: The caller's request.
        headers: Caller headers, lower-cased.
        policy: The route's compiled ``restrict:`` rules.
        body: The caller's JSON body ``request`` was decoded from, if any (rules read it too).
        carried: Requirements the request brings from elsewhere (a continued thread's).
    """
    found: list[Requirement] = [*carried] if carried else []
    header = headers.get(HEADER_REQUIRE)
    if header:
        labels = parse_labels(header)
        if labels:
            found.append(Requirement("header", HEADER_REQUIRE, tuple(labels)))
    key = required_labels.get()
    if key is not None:
        name, labels_of_key = key
        found.append(Requirement("api_key", name, tuple(sorted(labels_of_key))))
    if policy is not None:
        for rule, count in policy.matches(request, body):
            found.append(Requirement("route", rule.label, tuple(rule.require), count))
    return found


def restriction_for(
    request: ChatRequest,
    headers: Mapping[str, str],
    policy: RestrictPolicy | None,
    targets: Mapping[str, TargetInfo],
    relevant: Iterable[str],
    body: dict[str, Any] | None = None,
    carried: Sequence[Requirement] = (),
) -> Restriction | None:
    """The request's restriction, or ``None`` when nothing restricts it.

    Args:
        request: The caller's request (route rules search its text).
        headers: Caller headers, lower-cased.
        policy: The route's compiled ``restrict:`` rules.
        targets: Every configured target.
        relevant: The targets the route could use, for the record's ``removed`` list.
        body: The caller's JSON body, when the request came as one: an upstream of the
            caller's format receives it verbatim, so the rules read it as well.
        carried: Requirements from elsewhere (a continued thread's, :mod:`.threads`).
    """
    requirements = requirements_for(request, headers, policy, body, carried)
    if not requirements:
        return None
    labels = frozenset(label for r in requirements for label in r.labels)
    allowed = frozenset(name for name, info in targets.items() if labels <= info.labels)
    removed = [n for n in dict.fromkeys(relevant) if n not in allowed]
    restriction = Restriction(requirements, labels, allowed, removed)
    if policy is not None:
        matched = [
            rule for rule in policy.rules if any(r.source == "route" and r.name == rule.label for r in requirements)
        ]
        if matched:
            restriction.redact = policy.redactor(matched, MASK)
    return restriction
