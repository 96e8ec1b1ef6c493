"""Where calibration scores come from: a dataset run through the route, or a decision log.

Layer: ``eval``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from switchyard._dataclass import dataclass
from switchyard.config.load import LoadedConfig
from switchyard.eval.dataset import Dataset, DatasetError, EvalItem, MissingOutcome, outcome
from switchyard.eval.decision_log import LogStats, read_decision_log
from switchyard.eval.evaluate import EvalError, TierChoice, item_cost, resolve_mapping
from switchyard.eval.groups import GROUP_KEY, group_of
from switchyard.eval.offline import build_offline_engine, chat_request, decide, run_pool
from switchyard.eval.progress import Progress
from switchyard.protocol.errors import SwitchyardError


@dataclass(slots=True)
class ScoreSet:
    """Per-request scores and what calibration needs besides them.

    Attributes:
        scores: The router's score per request (``None``: decided without one).
        fixed: Whether each request went to the capable tier (used for unscored ones).
        capable_cost: Per-request cost on the capable tier (``None``: not collected).
        efficient_cost: Per-request cost on the efficient tier.
        skipped: Why requests were left out (message → count).
        groups: Per request, its ``benchmark`` (or ``-``); empty for decision logs.
    """

    scores: list[float | None] = field(default_factory=list)
    fixed: list[bool] = field(default_factory=list)
    capable_cost: list[float] | None = None
    efficient_cost: list[float] | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)

    def skip(self, why: str) -> None:
        """Counts one left-out request."""
        self.skipped[why] = self.skipped.get(why, 0) + 1


async def scores_from_dataset(
    loaded: LoadedConfig,
    route: str,
    dataset: Dataset,
    *,
    tiers: TierChoice | None,
    with_costs: bool,
    mapping: Mapping[str, str] | None = None,
    cost_per_call: Mapping[str, float] | None = None,
    concurrency: int = 1,
    progress: bool | None = None,
) -> ScoreSet:
    """Runs the route's decision over ``dataset`` and collects scores (and tier costs).

    Raises:
        EvalError: Costs are wanted but the tiers are unknown or a tier has no cost.
        DatasetError: The dataset is malformed or lacks a mapped model.
    """
    resolved: dict[str, str] = {}
    if with_costs:
        if tiers is None:
            raise EvalError("--budget-usd needs the capable/efficient tiers: give --capable and --efficient")
        resolved = resolve_mapping(
            loaded, [tiers.capable, tiers.efficient], mapping or {}, dataset.first_with_models(), dataset.name
        )
    out = ScoreSet(capable_cost=[] if with_costs else None, efficient_cost=[] if with_costs else None)
    show = progress is not False
    bar = Progress(dataset.count() if show else None, f"calibrate {route}", enabled=None if show else False)
    offline = build_offline_engine(loaded)
    per_call = dict(cost_per_call or {})

    async def work(item: EvalItem) -> None:
        costs: dict[str, float] = {}
        try:
            outs = {role: outcome(item, target, source=dataset.name, target=role) for role, target in resolved.items()}
        except MissingOutcome as exc:  # a gap in the logs: left out and counted, as `eval` does
            out.skip(exc.reason)
            bar.update()
            return
        for role, found in outs.items():
            cost = item_cost(loaded, role, found, per_call)
            if cost is None:
                raise EvalError(
                    f"{dataset.name}:{item.line}: no cost for target {role!r} (no cost_usd or tokens); "
                    f"give --cost-per-call {role}=USD"
                )
            costs[role] = cost
        try:
            request = chat_request(route, item.messages or [{"role": "user", "content": ""}])
        except SwitchyardError as exc:
            raise DatasetError(f"{dataset.name}:{item.line}: messages do not decode: {exc.message}") from None
        decided = await decide(offline.engine, request, f"eval:{item.id}")
        bar.update()
        if decided.skipped is not None:
            out.skip(decided.skipped)
            return
        out.scores.append(decided.score)
        out.fixed.append(tiers is not None and decided.selected == tiers.capable)
        out.groups.append(group_of(item, GROUP_KEY))
        if with_costs and tiers is not None:
            assert out.capable_cost is not None and out.efficient_cost is not None
            out.capable_cost.append(costs[tiers.capable])
            out.efficient_cost.append(costs[tiers.efficient])

    try:
        await run_pool(dataset, work, concurrency=concurrency)
    finally:
        bar.close()
        await offline.aclose()
    return out


def scores_from_log(
    loaded: LoadedConfig, route: str, path: str, *, tiers: TierChoice | None, with_costs: bool
) -> tuple[ScoreSet, LogStats]:
    """Scores of ``route``'s served requests in a decision log, with tier costs from token counts.

    Raises:
        EvalError: Costs are wanted but the tiers are unknown.
        DecisionLogError: The log cannot be read.
    """
    if with_costs and tiers is None:
        raise EvalError("--budget-usd needs the capable/efficient tiers: give --capable and --efficient")
    stats = LogStats()
    out = ScoreSet(capable_cost=[] if with_costs else None, efficient_cost=[] if with_costs else None)
    targets = loaded.config.targets
    for rec in read_decision_log(path, route, stats):
        out.scores.append(rec.score)
        out.fixed.append(tiers is not None and rec.selected == tiers.capable)
        if with_costs and tiers is not None:
            assert out.capable_cost is not None and out.efficient_cost is not None
            out.capable_cost.append(targets[tiers.capable].price.cost(rec.usage))
            out.efficient_cost.append(targets[tiers.efficient].price.cost(rec.usage))
    return out, stats
