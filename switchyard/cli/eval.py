"""``switchyard eval``: score a route offline on recorded outcomes (decide only, no answer calls)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from switchyard.cli._common import HelpFormatter, add_config_arg, fail, load_or_exit, route_or_fail

_EPILOG = """\
Examples:
  # RouteLLM's MMLU+GSM8K outcomes (contaminated prompts dropped), targets mapped to dataset models
  switchyard eval -c examples/eval/routellm.yaml --route mix \\
      --dataset ../shared/data/routellm-evals/routellm_evals.jsonl \\
      --where benchmark=mmlu --where benchmark=gsm8k --where routellm_contaminated=false

  # a router with a score: sweep every threshold, write curve.csv and plot.png to eval-out/
  switchyard eval -c router.yaml --route agent --dataset mine.jsonl --sweep --out eval-out

  # machine-readable: one JSON object (apgr, cpt50, cpt80, quality, capable_share, cost_usd, ...)
  switchyard eval -c router.yaml --route agent --dataset mine.jsonl --json

Each item goes through the route's decision only; the recorded outcome and cost of the model
mapped to the chosen target stand in for the answer. A target maps to the dataset model named
like the target or like its `model` id unless --map says otherwise. The capable/efficient tiers
come from --capable/--efficient, else from the route type, else (two targets) from prices.
Routers that call a judge model call it when its client is usable; otherwise the items are
listed as skipped, with the reason. Items without an outcome for a mapped model are skipped and
counted (--strict stops instead). Outcome types (0/1 correctness, 1-10 judge scores) are never
averaged raw: mixed types are rescaled to 0-1 per type, and every benchmark (--by) gets its own
rows in its own units. --where also filters on model fields: --where models.gpt-4.correct=true.
Dataset format and metrics: docs/evaluation.md.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "eval",
        help="score a route offline on a dataset of recorded outcomes (APGR, CPT, cost)",
        description="Run a route's decision over a JSONL dataset and replay the recorded outcomes.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    add_config_arg(p)
    p.add_argument("--route", required=True, help="route to evaluate")
    p.add_argument("--dataset", required=True, metavar="FILE", help="JSONL dataset (see docs/evaluation.md)")
    add_selection_args(p)
    p.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="TARGET=MODEL",
        help="dataset model whose outcomes stand for TARGET (repeatable)",
    )
    p.add_argument("--capable", metavar="TARGET", help="the capable (strong) tier, with --efficient")
    p.add_argument("--efficient", metavar="TARGET", help="the efficient (weak) tier, with --capable")
    p.add_argument(
        "--cost-per-call",
        action="append",
        default=[],
        metavar="TARGET=USD",
        help="flat cost per call of TARGET for items without a recorded cost_usd or tokens (repeatable)",
    )
    p.add_argument("--sweep", action="store_true", help="sweep the score threshold; write curve.csv and plot.png")
    p.add_argument("--out", metavar="DIR", help="write decisions.jsonl, metrics.json, plot.png (and curve.csv)")
    p.add_argument("--title", help="title of plot.png instead of route and dataset")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--concurrency", type=int, default=1, help="decisions in flight (routers with judge calls)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="stop at an item without an outcome for a mapped model (default: skip it and count the reason)",
    )
    p.add_argument(
        "--by",
        default="benchmark",
        metavar="FIELD",
        help="item field whose values get their own metrics rows (default: benchmark)",
    )
    add_run_args(p)
    p.set_defaults(func=run)


def add_run_args(p: argparse.ArgumentParser) -> None:
    """``--no-progress`` and ``--log-level`` (shared with ``calibrate`` and ``replay``)."""
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument(
        "--log-level",
        default="error",
        choices=["debug", "info", "warning", "error"],
        help="level of switchyard's own log lines (a failing judge would warn once per item)",
    )


@contextmanager
def log_level(level: str) -> Iterator[None]:
    """Sets the ``switchyard`` loggers' level for one command and restores it afterwards."""
    logger = logging.getLogger("switchyard")
    before = logger.level
    logger.setLevel(getattr(logging, level.upper()))
    try:
        yield
    finally:
        logger.setLevel(before)


def add_selection_args(p: argparse.ArgumentParser) -> None:
    """``--where``, ``--ids`` and ``--limit`` (shared with ``calibrate``)."""
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep items whose field KEY equals VALUE (repeat: same key = any of, different keys = all)",
    )
    p.add_argument("--ids", metavar="FILE", help="keep only the item ids listed in FILE (one per line)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N items (after filters)")


def pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    """``["a=b", "c=d"]`` → ``{"a": "b", "c": "d"}``.

    Raises:
        ValueError: An entry is not ``KEY=VALUE``.
    """
    out: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip() or not rest.strip():
            raise ValueError(f"{flag} takes KEY=VALUE, got {value!r}")
        out[key.strip()] = rest.strip()
    return out


def open_dataset(args: argparse.Namespace) -> Any:
    """The dataset named by ``--dataset`` with ``--where/--ids/--limit`` applied."""
    from switchyard.eval.dataset import Dataset, parse_filters, read_ids

    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be >= 1")
    ids = read_ids(args.ids) if args.ids else None
    return Dataset(args.dataset, filters=parse_filters(args.where), ids=ids, limit=args.limit)


def run(args: argparse.Namespace) -> int:
    loaded = load_or_exit(args.config)
    if loaded is None:
        return 1
    from switchyard.config.load import ConfigError
    from switchyard.eval.dataset import DatasetError
    from switchyard.eval.evaluate import EvalError, ItemResult, run_eval

    try:
        mapping = pairs(args.map, "--map")
        per_call = {k: float(v) for k, v in pairs(args.cost_per_call, "--cost-per-call").items()}
        dataset = open_dataset(args)
    except (ValueError, DatasetError) as exc:
        return fail(str(exc))
    if route_or_fail(loaded, args.route) is None:
        return 1
    out_dir = Path(args.out) if args.out else (Path(f"eval-{args.route}") if args.sweep else None)
    sink: IO[bytes] | None = None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        sink = (out_dir / "decisions.jsonl").open("wb")

    def write(result: ItemResult) -> None:
        if sink is not None:
            sink.write(_decision_line(result))

    try:
        with log_level(args.log_level):
            result = asyncio.run(
                run_eval(
                    loaded,
                    args.route,
                    dataset,
                    mapping=mapping,
                    capable=args.capable,
                    efficient=args.efficient,
                    cost_per_call=per_call,
                    concurrency=args.concurrency,
                    progress=False if args.no_progress else None,
                    require_scores=args.sweep,
                    on_item=write,
                    strict=args.strict,
                    group_key=args.by,
                )
            )
    except (EvalError, DatasetError, ConfigError, ValueError, KeyError) as exc:
        return fail(str(exc).strip("'\""))
    finally:
        if sink is not None:
            sink.close()
    files = _write_outputs(result, out_dir, sweep=args.sweep, title=args.title) if out_dir is not None else []
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from switchyard.eval.report import render

        print(render(result))
        for f in files:
            print(f"wrote {f}")
    return 0


def _decision_line(result: Any) -> bytes:
    import orjson

    d = result.decided
    chosen = result.outcomes.get(d.selected) if d.selected else None
    line = {
        "id": result.id,
        **d.to_dict(),
        "quality": None if chosen is None or d.skipped else chosen.quality,
        "cost_usd": None if d.skipped or not d.selected else result.costs.get(d.selected),
    }
    return orjson.dumps(line) + b"\n"


def _write_outputs(result: Any, out_dir: Path, *, sweep: bool, title: str | None) -> list[Path]:
    from switchyard.eval.plot import PlotUnavailable, plot_result, write_curve_csv

    files = [out_dir / "decisions.jsonl"]
    metrics = out_dir / "metrics.json"
    metrics.write_text(json.dumps(result.to_dict(curve=sweep), indent=2) + "\n", encoding="utf-8")
    files.append(metrics)
    if sweep and result.two_tier is not None:
        files.append(write_curve_csv(result, out_dir / "curve.csv"))
    try:
        files.append(plot_result(result, out_dir / "plot.png", title=title))
    except PlotUnavailable as exc:
        print(f"note: {exc}", file=sys.stderr)
    return files
