"""``switchyard eval`` as a library call: decide every dataset item, replay recorded outcomes.

Layer: ``eval``.

Each item goes through the route's decision only (``Engine.decide``: no answer call). The
recorded outcome and cost of the model mapped to the chosen target stand in for the answer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.config.load import LoadedConfig
from switchyard.eval.dataset import Dataset, DatasetError, EvalItem, MissingOutcome, Outcome, outcome
from switchyard.eval.good_enough import GoodEnough, GoodEnoughError
from switchyard.eval.groups import GROUP_KEY, GroupReport, group_of, normalise, outcome_type, per_group
from switchyard.eval.metrics import (
    Row,
    TwoTierReport,
    evaluate_choices,
    evaluate_decisions,
    evaluate_scores,
    target_baselines,
    two_tier_baselines,
)
from switchyard.eval.offline import Decided, build_offline_engine, chat_request, decide, route_spec, run_pool
from switchyard.eval.progress import Progress
from switchyard.eval.reliability import Reliability, reliability
from switchyard.protocol.errors import SwitchyardError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import Usage
from switchyard.routers.base import RouterSpec, Tiers


class EvalError(ValueError):
    """The evaluation cannot run as asked; the message says what to change."""


@dataclass(slots=True)
class TierChoice:
    """The two tiers of a route and where that came from (``flags``, ``route`` or ``prices``)."""

    capable: str
    efficient: str
    origin: str


@dataclass(slots=True)
class ItemResult:
    """One dataset item after the route decided it."""

    id: str
    decided: Decided
    outcomes: dict[str, Outcome]
    costs: dict[str, float | None]
    group: str = "-"
    outcome_type: str = "binary"


@dataclass(slots=True)
class EvalResult:
    """Everything ``switchyard eval`` reports.

    Attributes:
        route: Route name.
        router: Route type.
        dataset: Dataset file name.
        mapping: Target → dataset model.
        tiers: Capable/efficient targets, when known.
        items: Per-item results, in dataset order (skipped ones included).
        row: The route's row (decided items only).
        baselines: Baseline rows over the same items.
        two_tier: Two-tier metrics (``None`` without tiers).
        router_cost_usd: Cost of the router's own model calls.
        notes: Things the reader should know (unknown costs, inferred tiers …).
        groups: Two-tier metrics per group (``benchmark``), each in its own units; empty with
            fewer than two groups or without tiers.
        group_key: The field the groups come from.
        normalised: Whether several outcome types were rescaled to 0-1 (docs/evaluation.md).
        calibration: Reliability of the route's P(success) per target against each item's
            good-enough label (``None`` when the route reports no P(success)).
    """

    route: str
    router: str
    dataset: str
    mapping: dict[str, str]
    tiers: TierChoice | None
    items: list[ItemResult]
    row: Row
    baselines: list[Row]
    two_tier: TwoTierReport | None
    router_cost_usd: float
    notes: list[str] = field(default_factory=list)
    groups: list[GroupReport] = field(default_factory=list)
    group_key: str = GROUP_KEY
    normalised: bool = False
    calibration: Reliability | None = None

    @property
    def skipped(self) -> list[ItemResult]:
        """Items the route could not decide."""
        return [r for r in self.items if r.decided.skipped is not None]

    def to_dict(self, *, curve: bool = False) -> dict[str, Any]:
        """The JSON object ``switchyard eval --json`` prints."""
        tt = self.two_tier.to_dict(curve=curve) if self.two_tier is not None else {}
        skipped = self.skipped
        out: dict[str, Any] = {
            "route": self.route,
            "router": self.router,
            "dataset": self.dataset,
            "n": self.row.n,
            "skipped": len(skipped),
            "apgr": tt.get("apgr"),
            "cpt50": tt.get("cpt50"),
            "cpt80": tt.get("cpt80"),
            "quality": self.row.quality,
            "capable_share": self.row.capable_share,
            "cost_usd": self.row.cost_usd,
            "pgr": tt.get("pgr"),
            "usd_saved_at_95": tt.get("usd_saved_at_95"),
            "share_at_95": tt.get("share_at_95"),
            "quality_at_95": tt.get("quality_at_95"),
            "capable_quality": tt.get("capable_quality"),
            "efficient_quality": tt.get("efficient_quality"),
            "capable_cost_usd": tt.get("capable_cost_usd"),
            "efficient_cost_usd": tt.get("efficient_cost_usd"),
            "router_cost_usd": self.router_cost_usd,
            "shares": self.row.shares,
            "swept": tt.get("swept", False),
            "tiers": None
            if self.tiers is None
            else {"capable": self.tiers.capable, "efficient": self.tiers.efficient, "from": self.tiers.origin},
            "mapping": self.mapping,
            "baselines": [r.to_dict() for r in self.baselines],
            "skipped_items": [{"id": r.id, "reason": r.decided.skipped} for r in skipped],
            "skipped_reasons": dict(Counter(r.decided.skipped or "" for r in skipped)),
            "normalised": self.normalised,
            "group_key": self.group_key,
            "groups": [g.to_dict() for g in self.groups],
            "notes": self.notes,
            "ece": None if self.calibration is None else self.calibration.ece,
            "reliability": None if self.calibration is None else self.calibration.to_dict(),
        }
        if curve and "curve" in tt:
            out["curve"] = tt["curve"]
        return out


# -- set-up ----------------------------------------------------------------------------------


def resolve_tiers(
    loaded: LoadedConfig, route: str, capable: str | None = None, efficient: str | None = None
) -> TierChoice | None:
    """The route's tiers: ``--capable/--efficient`` flags, else ``RouterSpec.tiers()``, else —
    for a route with exactly two targets of different prices — the pricier one is capable.

    Raises:
        EvalError: Only one flag given, or a flag names an unknown target.
    """
    spec = route_spec(loaded, route)
    if (capable is None) != (efficient is None):
        raise EvalError("give both --capable and --efficient, or neither")
    known = loaded.config.targets
    if capable is not None and efficient is not None:
        for flag, name in (("--capable", capable), ("--efficient", efficient)):
            if name not in known:
                raise EvalError(f"{flag} {name!r} is not a target; targets: {', '.join(known)}")
        if capable == efficient:
            raise EvalError("--capable and --efficient must name different targets")
        return TierChoice(capable, efficient, "flags")
    declared: Tiers | None = spec.tiers()
    if declared is not None:
        return TierChoice(declared["capable"], declared["efficient"], "route")
    own = _own_targets(spec)
    if len(own) == 2:
        pa, pb = (known[t].price.list_per_mtok for t in own)
        if pa != pb:
            hi, lo = (own[0], own[1]) if pa > pb else (own[1], own[0])
            return TierChoice(hi, lo, "prices")
    return None


def _own_targets(spec: RouterSpec) -> list[str]:
    return list(dict.fromkeys(t for _, t in spec.target_refs()))


def resolve_mapping(
    loaded: LoadedConfig,
    targets: Sequence[str],
    explicit: Mapping[str, str],
    first: EvalItem,
    dataset_name: str,
) -> dict[str, str]:
    """Target → dataset model: ``--map`` first, else a dataset model named like the target or
    like the target's ``model`` id.

    Raises:
        EvalError: A target cannot be mapped; the message lists the dataset's models.
    """
    known = loaded.config.targets
    available = list(first.models)
    for target, model in explicit.items():
        if target not in known:
            raise EvalError(f"--map {target}={model}: {target!r} is not a target; targets: {', '.join(known)}")
        if model not in available:
            raise EvalError(
                f"--map {target}={model}: {dataset_name} has no model {model!r}; "
                f"models in the dataset: {', '.join(available)}"
            )
    mapping: dict[str, str] = {}
    for target in targets:
        if target in explicit:
            mapping[target] = explicit[target]
        elif target in available:
            mapping[target] = target
        elif target in known and known[target].model in available:
            mapping[target] = known[target].model
        else:
            model = known[target].model if target in known else "?"
            raise EvalError(
                f"target {target!r} (model {model!r}) has no outcomes in {dataset_name}; "
                f"map it with --map {target}=DATASET_MODEL; models in the dataset: {', '.join(available)}"
            )
    return mapping


def item_cost(loaded: LoadedConfig, target: str, out: Outcome, per_call: Mapping[str, float]) -> float | None:
    """USD of one outcome: recorded ``cost_usd``, else recorded tokens at the target's price, else
    the flat ``per_call`` price of the target, else ``None``."""
    if out.cost_usd is not None:
        return out.cost_usd
    if out.input_tokens is not None or out.output_tokens is not None:
        usage = Usage(input_tokens=out.input_tokens or 0, output_tokens=out.output_tokens or 0)
        return loaded.config.targets[target].price.cost(usage)
    return per_call.get(target)


# -- the run ---------------------------------------------------------------------------------


def _request(route: str, item: EvalItem, source: str) -> ChatRequest:
    """The request the route decides for ``item`` (of the dataset named ``source``).

    Raises:
        DatasetError: The item's messages do not decode (file and line named).
    """
    try:
        # An item with no prompt or messages is an empty user message (counted in a note).
        return chat_request(route, item.messages or [{"role": "user", "content": ""}])
    except SwitchyardError as exc:
        raise DatasetError(f"{source}:{item.line}: messages do not decode: {exc.message}") from None


async def _prefetch(router: Any, route: str, dataset: Dataset) -> dict[str, ChatRequest]:
    """Lets a learned router extract every item's text in large batches before the decisions
    (deciding one item at a time would extract one text at a time).

    Returns:
        The requests built for it, by item id, for the decisions to use rather than decode the
        items again (empty when the router does not prefetch: the items stay streamed).
    """
    prefetch, text_of = getattr(router, "prefetch", None), getattr(router, "text_of", None)
    if not callable(prefetch) or not callable(text_of):
        return {}
    built: dict[str, ChatRequest] = {}
    for item in dataset:
        try:
            built[item.id] = _request(route, item, dataset.name)
        except DatasetError:
            continue  # reported when the item is decided
    await prefetch([text_of(request) for request in built.values()])
    return built


async def run_eval(
    loaded: LoadedConfig,
    route: str,
    dataset: Dataset,
    *,
    mapping: Mapping[str, str] | None = None,
    capable: str | None = None,
    efficient: str | None = None,
    cost_per_call: Mapping[str, float] | None = None,
    concurrency: int = 1,
    progress: bool | None = None,
    require_scores: bool = False,
    on_item: Callable[[ItemResult], None] | None = None,
    strict: bool = False,
    group_key: str = GROUP_KEY,
) -> EvalResult:
    """Decides every item of ``dataset`` with route ``route`` and scores the choices.

    Args:
        loaded: A validated config.
        route: Route name.
        dataset: The dataset (filters applied).
        mapping: Explicit target → dataset model (``--map``).
        capable: Capable target (``--capable``; with ``efficient``).
        efficient: Efficient target.
        cost_per_call: Flat USD per call per target, for items with no recorded cost or tokens.
        concurrency: Decisions in flight (1 keeps seeded random routers reproducible).
        progress: ``False``: no progress; otherwise on stderr, redrawn in place on a terminal
            and as a plain line every 10 s elsewhere (:class:`~switchyard.eval.progress.Progress`).
        require_scores: Fail unless the route gives scores (``--sweep``).
        on_item: Called with each item's result as it finishes (e.g. to stream a JSONL file).
        strict: Stop at the first item that lacks an outcome for a mapped model, instead of
            skipping it (and counting it with the reason).
        group_key: Item field whose values get their own metrics (default ``benchmark``).

    Raises:
        EvalError: Bad flags or mapping, or no item could be decided.
        DatasetError: The dataset is malformed or lacks a mapped model (file and line named).
        KeyError: No such route.
    """
    spec = route_spec(loaded, route)
    controlled = getattr(spec, "controlled", None)
    sequential = concurrency > 1 and callable(controlled) and bool(controlled())
    if sequential:
        # A controlled threshold depends on the order of the scores before it: replay the
        # dataset in file order, one decision at a time, as live traffic would have arrived.
        concurrency = 1
    tiers = resolve_tiers(loaded, route, capable, efficient)
    if require_scores and tiers is None:
        raise EvalError(
            f"route {route!r} declares no capable/efficient tiers; a threshold sweep needs them: "
            "give --capable TARGET --efficient TARGET"
        )
    needed = _own_targets(spec)
    if tiers is not None:
        needed += [t for t in (tiers.capable, tiers.efficient) if t not in needed]
    needed += [t for t in (mapping or {}) if t not in needed]
    first = dataset.first_with_models()
    resolved = resolve_mapping(loaded, needed, mapping or {}, first, dataset.name)
    per_call = dict(cost_per_call or {})
    for t in per_call:
        if t not in loaded.config.targets:
            raise EvalError(f"--cost-per-call {t}: not a target; targets: {', '.join(loaded.config.targets)}")
    show = progress is not False
    offline = build_offline_engine(loaded)
    no_prompt = 0
    prefetched: dict[str, ChatRequest] = {}
    bar = Progress(dataset.count() if show else None, f"eval {route}", enabled=None if show else False)

    async def work(item: EvalItem) -> ItemResult:
        nonlocal no_prompt
        group = group_of(item, group_key)
        try:
            outs = {t: outcome(item, m, source=dataset.name, target=t) for t, m in resolved.items()}
        except MissingOutcome as exc:
            if strict:
                raise
            return ItemResult(item.id, Decided(selected=None, skipped=exc.reason), {}, {}, group)
        costs = {t: item_cost(loaded, t, o, per_call) for t, o in outs.items()}
        if item.messages is None:
            no_prompt += 1
        ready = prefetched.pop(item.id, None)
        request = ready if ready is not None else _request(route, item, dataset.name)
        decided = await decide(offline.engine, request, f"eval:{item.id}")
        if decided.selected is not None and decided.selected not in resolved:
            decided.skipped = f"chose target {decided.selected!r}, which has no mapped dataset model (use --map)"
        return ItemResult(item.id, decided, outs, costs, group, outcome_type(item, outs))

    def done(item: EvalItem, result: ItemResult) -> None:
        bar.update()
        if on_item is not None:
            on_item(result)

    try:
        router = offline.engine.routes[route].router if route in offline.engine.routes else None
        prefetched = await _prefetch(router, route, dataset)
        items = await run_pool(dataset, work, concurrency=concurrency, on_done=done)
    finally:
        bar.close()
        await offline.aclose()
    notes: list[str] = []
    if sequential:
        notes.append(
            f"route {route!r} controls its threshold online: decided in dataset order, one at a time "
            "(--concurrency ignored)"
        )
    if any(r.decided.skipped for r in items):
        notes += [f"client {c!r} is unusable here: {why}" for c, why in offline.unavailable.items()]
    if no_prompt:
        notes.append(f"{no_prompt} item(s) have no prompt or messages; the router saw an empty user message")
    if tiers is not None and tiers.origin == "prices":
        notes.append(
            f"tiers inferred from prices: capable={tiers.capable}, efficient={tiers.efficient} "
            "(override with --capable/--efficient)"
        )
    result = _score(loaded, route, spec, dataset.name, resolved, tiers, items, notes, require_scores)
    result.group_key = group_key
    result.calibration = calibration_of(items, notes)
    return result


def calibration_of(items: Sequence[ItemResult], notes: list[str]) -> Reliability | None:
    """Reliability of every decided item's P(success) per target against the target's recorded
    outcome, turned into a good-enough label by its outcome type's bar
    (:mod:`switchyard.eval.good_enough`); ``None`` when no decision carried P(success)."""
    rule = GoodEnough()
    probs: list[float] = []
    labels: list[float] = []
    unlabelled = 0
    for r in items:
        p = r.decided.p_success
        if r.decided.skipped is not None or not p:
            continue
        for target, out in r.outcomes.items():
            if target not in p:
                continue
            try:
                label = rule.label(out.quality, binary=out.kind == "binary", outcome_type=r.outcome_type)
            except GoodEnoughError:
                unlabelled += 1
                continue
            probs.append(p[target])
            labels.append(label)
    if unlabelled:
        notes.append(
            f"{unlabelled} (item, target) outcome(s) left out of the calibration: their outcome type has no "
            "good-enough bar (docs/learned-routers.md, 'Graded outcomes')"
        )
    return reliability(probs, labels) if probs else None


def _score(
    loaded: LoadedConfig,
    route: str,
    spec: RouterSpec,
    dataset_name: str,
    mapping: dict[str, str],
    tiers: TierChoice | None,
    items: list[ItemResult],
    notes: list[str],
    require_scores: bool,
) -> EvalResult:
    decided = [r for r in items if r.decided.skipped is None]
    if not decided:
        reasons = Counter(r.decided.skipped for r in items)
        top = "; ".join(f"{n} x {why}" for why, n in reasons.most_common(3))
        raise EvalError(f"route {route!r} decided none of the {len(items)} item(s): {top}")
    targets = list(mapping)
    types = [r.outcome_type for r in decided]
    fixed, normalised = normalise(types, [r.outcomes for r in decided])
    if normalised:
        kinds = ", ".join(sorted(set(types)))
        notes.append(
            f"outcome types {kinds} are mixed: score outcomes were rescaled to 0-1 per type before pooling "
            "(per-group rows keep their own units; docs/evaluation.md)"
        )
    quality = {t: [o[t].quality for o in fixed] for t in targets}
    raw_quality = {t: [r.outcomes[t].quality for r in decided] for t in targets}
    costs: dict[str, list[float] | None] = {}
    for t in targets:
        values = [r.costs[t] for r in decided]
        missing = sum(1 for v in values if v is None)
        if missing:
            costs[t] = None
            notes.append(
                f"cost of {t!r} ({mapping[t]}) unknown for {missing} item(s): the dataset has no cost_usd or "
                f"tokens; give --cost-per-call {t}=USD for dollar figures"
            )
        else:
            costs[t] = [v for v in values if v is not None]
    router_cost = math.fsum(r.decided.router_cost_usd for r in decided)
    choices = [r.decided.selected or "" for r in decided]
    row = evaluate_choices(choices, quality, costs, name=f"route {route}", extra_cost_usd=router_cost)
    scores = [r.decided.score for r in decided]
    has_scores = any(s is not None for s in scores)
    if require_scores and not has_scores:
        raise EvalError(
            f"route {route!r} (type {spec.type}) gave no score for any item; --sweep needs a router that "
            "sets Decision.score (the probability that the capable model is needed)"
        )
    two_tier: TwoTierReport | None = None
    baselines: list[Row]
    if tiers is not None and all(c in (tiers.capable, tiers.efficient) for c in choices):
        cap, eff = tiers.capable, tiers.efficient
        picks = [c == cap for c in choices]
        args: dict[str, Any] = {
            "strong_cost": costs[cap] if costs[eff] is not None else None,
            "weak_cost": costs[eff] if costs[cap] is not None else None,
            "extra_cost_usd": router_cost,
        }
        if has_scores:
            two_tier = evaluate_scores(scores, quality[cap], quality[eff], choose_strong=picks, **args)
        else:
            two_tier = evaluate_decisions(picks, quality[cap], quality[eff], **args)
        row.capable_share, row.pgr = two_tier.capable_share, two_tier.pgr
        row.apgr, row.cpt50, row.cpt80 = two_tier.apgr, two_tier.cpt50, two_tier.cpt80
        baselines = two_tier_baselines(
            quality[cap],
            quality[eff],
            capable=cap,
            efficient=eff,
            strong_cost=args["strong_cost"],
            weak_cost=args["weak_cost"],
            share=two_tier.capable_share if two_tier.capable_share is not None else 0.5,
        )
        if two_tier.apgr is None:
            notes.append(f"{cap!r} is not better than {eff!r} on these items: PGR, APGR and CPT are undefined")
        groups = per_group(
            [r.group for r in decided],
            types,
            scores,
            picks,
            raw_quality[cap],
            raw_quality[eff],
            args["strong_cost"],
            args["weak_cost"],
        )
    else:
        groups = []
        if tiers is not None:
            notes.append("the route chose targets outside its two tiers; two-tier metrics are omitted")
        baselines = target_baselines(quality, costs)
    return EvalResult(
        route,
        spec.type,
        dataset_name,
        mapping,
        tiers,
        items,
        row,
        baselines,
        two_tier,
        router_cost,
        notes,
        groups=groups,
        normalised=normalised,
    )
