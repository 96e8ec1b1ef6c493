"""The runs the trajectory router learns from: recorded agent runs, their turns and outcomes.

Layer: ``eval``.

Reads, from a data directory laid out as ``../shared/data`` (each folder's PROVENANCE.md says
what it holds):

* ``agentdojo/agentdojo_trajectories.jsonl`` — 49 tasks x 21 models, every run's messages and
  outcome: each model's own runs;
* ``terminal-bench-trajectories/terminal_bench_trajectories_dev.jsonl`` — Claude Sonnet 4 runs
  of 23 Terminal-Bench tasks (the only per-step Terminal-Bench runs: they stand in for any
  model's run of the task), with ``terminal-bench-paired/terminal_bench_paired_tasks.jsonl``
  for the per-task resolve rates and costs of qwen-3-coder-480B, claude-4-sonnet and
  claude-4.1-opus;
* ``tau-bench-trajectories/tau_bench_airline_gpt4o.jsonl`` — gpt-4o runs with rewards (one
  model: no pair to learn a gain from; used to check that the estimate transfers as a failure
  signal).

``swebench-verified-minisweagent`` and ``openhands-index`` hold per-task outcomes without task
text or turns, so nothing the router reads at a turn exists there; they are not read.

Each run becomes its decision points: one per assistant message, with the feature vector of the
messages before it (what the agent had sent when that turn was asked for), computed with the
router's own incremental :func:`~switchyard.routers.trajectory.features.advance`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.offline import chat_request
from switchyard.routers.stage.runrules import RunRules, check, tally_from
from switchyard.routers.stage.runrules import Tally as RuleTally
from switchyard.routers.trajectory.features import Tally, advance, vector

AGENTDOJO = "agentdojo/agentdojo_trajectories.jsonl"
TB_RUNS = "terminal-bench-trajectories/terminal_bench_trajectories_dev.jsonl"
TB_TASKS = "terminal-bench-paired/terminal_bench_paired_tasks.jsonl"
TAU = "tau-bench-trajectories/tau_bench_airline_gpt4o.jsonl"

SUITE_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("AgentDojo", "claude-3-haiku-20240307", "claude-3-5-sonnet-20241022"),
    ("AgentDojo", "meta-llama_Llama-3.3-70B-Instruct", "claude-3-7-sonnet-20250219"),
    ("AgentDojo", "gemini-1.5-flash-002", "gemini-1.5-pro-002"),
    ("AgentDojo", "gpt-3.5-turbo-0125", "gpt-4-turbo-2024-04-09"),
    ("Terminal-Bench", "qwen-3-coder-480B", "claude-4-sonnet"),
)
"""The issue's scored pairs: ``(benchmark, efficient, capable)``."""

REPORT_ONLY_PAIRS: tuple[tuple[str, str, str], ...] = (("AgentDojo", "gpt-4o-mini-2024-07-18", "gpt-4o-2024-05-13"),)
"""Pairs reported where routing does not pay (the efficient model is as good as the capable one)."""

PRICE_RATIO = 2.0
"""A training pair needs the capable model's input price at least this many times the efficient one's."""


class TrajectoryDataError(ValueError):
    """A data file is missing or malformed (the message names it)."""


@dataclass(slots=True)
class Run:
    """One recorded run and its decision points.

    Attributes:
        id: Run id.
        benchmark: ``AgentDojo``, ``Terminal-Bench`` or ``tau-bench``.
        group: Suite (AgentDojo), task family (Terminal-Bench) or domain (tau-bench).
        task: Task id.
        model: The model that made the run.
        resolved: Whether it resolved the task.
        points: Sparse feature vectors, one per decision point (assistant message).
        rules: Per decision point, whether the stage router's persistent-errors rule (an error
            class back in a second tool result, timeouts and missing commands ignored) has fired.
    """

    id: str
    benchmark: str
    group: str
    task: str
    model: str
    resolved: bool
    points: list[dict[int, float]] = field(default_factory=list)
    rules: list[bool] = field(default_factory=list)


@dataclass(slots=True)
class Outcome:
    """One model's result on one task (a rate over its trials) and its mean USD per trial."""

    rate: float
    cost: float


@dataclass(slots=True)
class Corpus:
    """Everything read.

    Attributes:
        runs: Every run with its decision points.
        outcomes: ``benchmark -> task -> model -> Outcome``.
        prices: ``model -> input USD/Mtok`` (where known: picks the training pairs).
    """

    runs: list[Run]
    outcomes: dict[str, dict[str, dict[str, Outcome]]]
    prices: dict[str, float]


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise TrajectoryDataError(f"missing data file {path} (point --data at the shared data folder)")
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise TrajectoryDataError(f"{path}:{n}: not JSON ({exc})") from exc


RULES = RunRules(repeats=2)
"""The stage router's persistent-errors rule as ``examples/coding-agent.yaml`` sets it."""


def decision_points(messages: list[dict[str, Any]], dims: int) -> tuple[list[dict[int, float]], list[bool]]:
    """Feature vectors before each assistant message (one decision without any), and whether
    the persistent-errors rule has fired by then."""
    ir = chat_request("trajectory", messages).messages
    points: list[dict[int, float]] = []
    fired: list[bool] = []
    tally: Tally | None = None
    rule: RuleTally | None = None
    cut = [i for i, msg in enumerate(ir) if msg.role == "assistant"] or [len(ir)]
    for i in cut:
        tally = advance(tally, ir[:i], dims)
        rule = tally_from(ir[:i], rule, RULES)
        points.append(vector(tally, dims))
        fired.append(check(rule, RULES) is not None)
    return points, fired


def _price(row: dict[str, Any]) -> float | None:
    tokens, usd = row.get("input_tokens_est"), row.get("cost_usd_est")
    out_tokens = row.get("output_tokens_est") or 0
    if not tokens or usd is None:
        return None
    return None if tokens <= 0 else float(usd) * 1e6 / (tokens + 4 * out_tokens)


def read_corpus(data: str | Path, dims: int, *, tau: bool = True) -> Corpus:
    """Reads every dataset the router learns from (see the module docstring).

    Raises:
        TrajectoryDataError: A file is missing or malformed.
    """
    root = Path(data)
    runs: list[Run] = []
    outcomes: dict[str, dict[str, dict[str, Outcome]]] = {}
    prices: dict[str, float] = {}
    ad = outcomes.setdefault("AgentDojo", {})
    for row in _lines(root / AGENTDOJO):
        task, model = row["task_id"], row["model"]
        resolved = bool(row["is_resolved"])
        ad.setdefault(task, {})[model] = Outcome(1.0 if resolved else 0.0, float(row.get("cost_usd_est") or 0.0))
        price = _price(row)
        if price is not None:
            prices[model] = max(prices.get(model, 0.0), price)
        runs.append(
            Run(row["id"], "AgentDojo", row["suite"], task, model, resolved, *decision_points(row["messages"], dims))
        )
    tb = outcomes.setdefault("Terminal-Bench", {})
    for row in _lines(root / TB_TASKS):
        tb[row["task_id"]] = {
            m: Outcome(float(v["score"]), float(v["cost_usd"] or 0.0)) for m, v in row["models"].items()
        }
    prices.update({"qwen-3-coder-480B": 0.45, "claude-4-sonnet": 3.0, "claude-4.1-opus": 15.0})
    for row in _lines(root / TB_RUNS):
        task = row["task_id"]
        if task not in tb:
            continue
        family = task.split(".")[0]
        runs.append(
            Run(
                row["id"],
                "Terminal-Bench",
                family,
                task,
                row["model"],
                bool(row["is_resolved"]),
                *decision_points(row["messages"], dims),
            )
        )
    if tau:
        for row in _lines(root / TAU):
            runs.append(
                Run(
                    row["id"],
                    "tau-bench",
                    "airline",
                    str(row["task_id"]),
                    "gpt-4o",
                    bool(row["success"]),
                    *decision_points(row["messages"], dims),
                )
            )
    return Corpus(runs, outcomes, prices)


def training_pairs(corpus: Corpus, benchmark: str) -> list[tuple[str, str]]:
    """``(efficient, capable)`` pairs of a benchmark to learn from: every two models whose input
    prices differ by :data:`PRICE_RATIO` or more."""
    models = sorted({m for per in corpus.outcomes.get(benchmark, {}).values() for m in per})
    pairs = []
    for e in models:
        for c in models:
            pe, pc = corpus.prices.get(e), corpus.prices.get(c)
            if e != c and pe is not None and pc is not None and pc >= PRICE_RATIO * pe:
                pairs.append((e, c))
    return pairs
