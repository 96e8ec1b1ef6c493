"""A stage router's logged turn replayed under another setting, for ``tune --decision-log``.

Layer: ``eval``.

Per turn the stage router logs the signals its cascade read (``details.signals``) and, with run
rules on, the run's counts (``details.run_tally``: assistant turns so far and, per error class,
the tool results it came back in). Those are everything the cascade and the run rules look at,
so the turn's tier under another ``confidence_threshold``, ``persistent_errors.repeats`` or
``turn_budget`` is recomputed here with the router's own functions (:func:`pick` and
:func:`check`): exact, not a model of the router. What the log cannot replay is refused:
a classifier's verdict (asked only for ambiguous turns, it would be asked on other turns under
another threshold), hysteresis (``hold_turns``) and ``compat: nvidia``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switchyard.eval.log_tune import Decider, LogTuneError, Turn
from switchyard.routers.stage.runrules import RunRules, Tally, check
from switchyard.routers.stage.scorer import pick
from switchyard.routers.stage.signals import Signals
from switchyard.routers.stage.spec import StageRouterSpec, run_rules

STAGE_KEYS = ("confidence_threshold", "persistent_errors.repeats", "turn_budget")
"""The stage-router settings a decision log replays."""


def current_value(route: Mapping[str, Any], key: str) -> float:
    """The route's own value of ``key`` (the spec's default where unset).

    Raises:
        LogTuneError: ``key`` is not replayable on this route.
    """
    spec = _spec(route)
    if key == "confidence_threshold":
        return spec.confidence_threshold
    if key == "persistent_errors.repeats":
        if spec.persistent_errors is None:
            raise LogTuneError(
                "persistent_errors is off on this route, so its records carry no error counts to replay "
                "repeats against; turn it on (persistent_errors: {repeats: 2}) and log again"
            )
        return float(spec.persistent_errors.repeats)
    if key == "turn_budget":
        if spec.turn_budget is None:
            raise LogTuneError(
                "turn_budget is unset on this route; a budget is replayed only from records that logged "
                "the run's counts (set turn_budget or persistent_errors and log again)"
            )
        return float(spec.turn_budget)
    raise LogTuneError(f"--grid key {key!r}: a stage_router route replays {', '.join(STAGE_KEYS)}")


def stage_decider(route: Mapping[str, Any], key: str) -> Decider:
    """Replays a logged turn of the stage route ``route`` (its YAML block) with ``key`` set to
    the value given.

    Raises:
        LogTuneError: The route or the key cannot be replayed from a log (the reason says why).
    """
    spec = _spec(route)
    current_value(route, key)  # the key's checks
    base = run_rules(spec.persistent_errors, spec.turn_budget)
    default = "capable" if spec.picker == "capable_first" else "efficient"

    def decide(turn: Turn, value: float) -> bool:
        details = turn.details
        signals = details.get("signals") if details is not None else None
        if not isinstance(signals, Mapping) or details is None:
            return turn.capable  # not one of the route's own decisions (a fallback, a control)
        threshold = value if key == "confidence_threshold" else spec.confidence_threshold
        verdict = pick(_signals(signals), picker=spec.picker, threshold=threshold)
        rules = _rules(base, key, value)
        if rules is not None and verdict.source != "override":
            tally = details.get("run_tally")
            if not isinstance(tally, Mapping):
                raise LogTuneError(
                    "a stage_router record has no details.run_tally (the run rules' counts): the log was "
                    "written by a switchyard before they were logged; log again with this version"
                )
            if check(_tally(tally), rules) is not None:
                return True
        return (verdict.tier or default) == "capable"

    return decide


def _spec(route: Mapping[str, Any]) -> StageRouterSpec:
    try:
        spec = StageRouterSpec.model_validate(dict(route))
    except ValueError as exc:
        raise LogTuneError(f"the route is not a valid stage_router block: {exc}") from exc
    if spec.classifier is not None:
        raise LogTuneError(
            "the route has a classifier: under another setting it would be asked on other turns, whose "
            "verdicts the log does not hold; tune it with --suite"
        )
    if spec.hold_turns is not None and (spec.hold_turns.capable or spec.hold_turns.efficient):
        raise LogTuneError("the route holds tiers (hold_turns): a hold depends on earlier turns; tune with --suite")
    if spec.compat != "none":
        raise LogTuneError("compat: nvidia routes are replayed with --suite only")
    return spec


def _rules(base: RunRules | None, key: str, value: float) -> RunRules | None:
    if base is None:
        return None
    if key == "persistent_errors.repeats":
        return RunRules(repeats=int(value), ignore=base.ignore, turn_budget=base.turn_budget)
    if key == "turn_budget":
        return RunRules(repeats=base.repeats, ignore=base.ignore, turn_budget=int(value))
    return base


def _signals(logged: Mapping[str, Any]) -> Signals:
    fields = {k: v for k, v in logged.items() if k in Signals.__dataclass_fields__}
    fields["errors"] = tuple(fields.get("errors", ()))
    return Signals(**fields)


def _tally(logged: Mapping[str, Any]) -> Tally:
    errors = logged.get("errors")
    counts = tuple((str(k), int(v)) for k, v in errors.items()) if isinstance(errors, Mapping) else ()
    return Tally(0, int(logged.get("turns", 0)), counts)


__all__ = ["STAGE_KEYS", "current_value", "stage_decider"]
