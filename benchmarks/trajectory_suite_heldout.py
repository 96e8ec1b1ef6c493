"""The trajectory router held out, through ``switchyard replay --suite``'s own replay and pricing.

For every pair of the agent suite (``examples/eval/agent-suite.yaml``) and every fold, a fresh
checkpoint is trained without the fold's tasks and without any pair that uses either model of
the scored pair (``switchyard train-trajectory --leave-out ... --leave-out-model ...``, its
default threshold chosen on those training runs), and the fold's runs are replayed through the
route of ``examples/agent-routing.yaml`` (or ``-c``) with that checkpoint:

* AgentDojo — leave-one-suite-out: the suite file's ``banking``, ``travel``, ``workspace``,
  ``slack`` splits, each scored by a checkpoint trained without that suite;
* Terminal-Bench — leave-one-benchmark-out: scored by a checkpoint trained without it.

Each pair's runs of all folds are then scored together with the suite's own arithmetic
(cache-priced AgentDojo turns, the null latch of the same share and timing, task-bootstrap
intervals) and printed as ``switchyard replay --suite`` prints. Nothing scored was trained or
tuned on. About 17 trainings of ~25 s each.

Run from the repository root::

    .venv/bin/python benchmarks/trajectory_suite_heldout.py [--data ../shared/data] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from switchyard.cli.replay_suite import print_suite
from switchyard.config.load import load_config
from switchyard.eval.agent_replay import with_setting
from switchyard.eval.counterfactual import Run
from switchyard.eval.evaluate import resolve_tiers
from switchyard.eval.latch import score_suite
from switchyard.eval.paired import TierMap, runs_from_turns
from switchyard.eval.replay import replay
from switchyard.eval.suite import load_suite
from switchyard.eval.suite_runs import LineCache, PairData, build_pair
from switchyard.eval.trajectory_data import read_corpus
from switchyard.eval.trajectory_heldout import Policy, choose_threshold, oob_sets
from switchyard.eval.trajectory_train import TrainConfig, describe, fit, rows_for

SUITES = ("banking", "travel", "workspace", "slack")
BENCHMARK = {"agentdojo": "AgentDojo", "terminal-bench": "Terminal-Bench"}


def train_fold(
    corpus: Any, config: TrainConfig, benchmark: str, group: str | None, banned: set[str], rules: bool, out: Path
) -> float:
    """Trains a checkpoint without ``benchmark[:group]`` and the ``banned`` models; returns its default threshold."""

    def keep(r: Any) -> bool:
        return not (r.benchmark == benchmark and (group is None or r.group == group))

    rows = rows_for(corpus, keep_run=keep, exclude_models=banned)
    model = fit(rows, config)
    oob = oob_sets(rows.task, config)
    threshold = choose_threshold(corpus, model, oob, keep, banned, 0.5, Policy(rules=rules))
    key = "default_threshold_with_rules" if rules else "default_threshold"
    training = {**describe(config, rows), key: threshold, "default_threshold": threshold}
    model = type(model)(model.dims, model.members, training, cost=model.cost)
    out.write_text(json.dumps(model.to_dict()), encoding="utf-8")
    return threshold


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--config", default="examples/agent-routing.yaml")
    parser.add_argument("--route", default="agent")
    parser.add_argument("--suite", default="examples/eval/agent-suite.yaml")
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument(
        "--share",
        type=float,
        metavar="S",
        help="hold S of the calls on the capable target (threshold: {target_capable_share: S}) instead of the "
        "checkpoint's threshold",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    base = load_config(args.config)
    if args.share is not None:
        control = {"target_capable_share": args.share, "warmup": 8, "window": 32, "feedback_window": 32}
        base = with_setting(base, args.route, "threshold", control)
    spec = base.raw["routes"][args.route]
    rules = spec.get("persistent_errors") is not None
    suite = load_suite(args.suite)
    config = TrainConfig()
    corpus = read_corpus(args.data, config.dims, tau=False)
    tiers = resolve_tiers(base, args.route, None, None)
    assert tiers is not None
    cache = LineCache()
    scored: list[tuple[PairData, list[Run]]] = []
    thresholds: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pair in suite.pairs(None):
            benchmark = BENCHMARK[pair.dataset]
            data = build_pair(suite, base, pair, split=None, lines=cache)
            folds: list[str | None] = list(SUITES) if benchmark == "AgentDojo" else [None]
            runs: list[Run] = []
            for fold in folds:
                path = Path(tmp) / f"{pair.efficient}-{fold}.json"
                t = train_fold(corpus, config, benchmark, fold, {pair.efficient, pair.capable}, rules, path)
                thresholds.setdefault(data.name, {})[fold or benchmark] = t
                loaded = with_setting(base, args.route, "checkpoint", str(path.resolve()))
                part = build_pair(suite, loaded, pair, split=suite.split(fold) if fold else None, lines=cache)
                summary = await replay(loaded, args.route, part.runs, tiers=tiers, progress=False)
                for turn in summary.turns:
                    data.scores.setdefault(turn.trajectory, []).append(turn.decided.score)
                tier_map = TierMap.build(loaded, tiers, {}, (pair.efficient, pair.capable))
                runs.extend(runs_from_turns(summary.turns, tier_map, data.outcomes).runs)
            scored.append((data, runs))
    score = score_suite(
        scored, resamples=args.bootstrap, labels={k: d.label or k for k, d in suite.spec.datasets.items()}
    )
    result = {
        "route": args.route,
        "router": spec["type"],
        "config": args.config,
        "suite": args.suite,
        "split": "held out (leave-one-suite-out / leave-one-benchmark-out, leave-pair-out)",
        "decisions": sum(len(v) for d, _ in scored for v in d.scores.values()),
        "seconds": time.perf_counter() - started,
        "files": {},
        "notes": [f"thresholds chosen on each fold's training runs: {json.dumps(thresholds, ensure_ascii=False)}"],
        **score.to_dict(),
    }
    print_suite(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
