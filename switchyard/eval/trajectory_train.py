"""Training the trajectory router: soft pair labels, weighted logistic heads, a bootstrap ensemble.

Layer: ``eval``; numpy imported inside the functions that need it (``switchyard[learned]``).

Rows are decision points of the efficient model's own runs (AgentDojo) or of the recorded runs
that stand in for it (Terminal-Bench: Claude Sonnet 4's). A row's labels average over the
capable models it is paired with: ``gain = mean_c p_c·(1 - p_e)`` and ``loss = mean_c
p_e·(1 - p_c)`` (``p`` = the model's resolve rate on the task; 0/1 for one run), so the model
learns from many pairs at once and a pair whose capable model is worse teaches the ``loss``
head. Rows of one run share its weight (each run counts once whatever its length), runs of one
task share the task's, and each benchmark weighs the same in total.

Each head is an L2-regularised logistic regression fitted by Nesterov's accelerated gradient
for a fixed number of steps from zero (deterministic: the same rows give the same weights).
Each of the ``members`` ensemble members is fitted on a task bootstrap (seeded).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.trajectory_data import Corpus, Run, training_pairs
from switchyard.routers.trajectory.features import DENSE
from switchyard.routers.trajectory.model import Head, TrajectoryModel

TB_MODELS = ("qwen-3-coder-480B", "claude-4-sonnet", "claude-4.1-opus")


@dataclass(slots=True, frozen=True)
class TrainConfig:
    """Training settings (fixed before any held-out scoring; docs/trajectory-router.md).

    Attributes:
        dims: Hash buckets of the task n-grams and error classes.
        members: Ensemble members (task bootstraps).
        l2: L2 penalty on the weights (not the bias), per unit of mean row weight.
        steps: Gradient steps per head.
        seed: Bootstrap seed.
        cost: Fit the relative-cost head too.
    """

    dims: int = 1024
    members: int = 8
    l2: float = 3e-3
    steps: int = 300
    seed: int = 0
    cost: bool = True


@dataclass(slots=True)
class Rows:
    """Training rows: sparse vectors, soft labels, weights and each row's task key."""

    x: list[dict[int, float]]
    gain: list[float]
    loss: list[float]
    weight: list[float]
    task: list[str]
    cost: list[float] = field(default_factory=list)


def rows_for(
    corpus: Corpus,
    *,
    keep_run: Callable[[Run], bool] = lambda r: True,
    exclude_models: Iterable[str] = (),
) -> Rows:
    """The training rows of the runs ``keep_run`` accepts, pairing no model in ``exclude_models``."""
    banned = set(exclude_models)
    out = Rows([], [], [], [], [], [])
    per_benchmark: dict[str, list[int]] = {}
    pairs = {b: [p for p in training_pairs(corpus, b) if not banned.intersection(p)] for b in corpus.outcomes}
    typical = _typical_costs(corpus)
    runs_of_task: dict[tuple[str, str], int] = {}
    kept = [r for r in corpus.runs if r.benchmark in corpus.outcomes and keep_run(r)]
    for r in kept:
        runs_of_task[(r.benchmark, r.task)] = runs_of_task.get((r.benchmark, r.task), 0) + 1
    for r in kept:
        outcomes = corpus.outcomes[r.benchmark].get(r.task)
        if outcomes is None:
            continue
        if r.benchmark == "AgentDojo":
            # the model's own run: its outcome is the run's
            partners = [c for e, c in pairs[r.benchmark] if e == r.model and c in outcomes]
            pe = [1.0 if r.resolved else 0.0] * len(partners)
        else:
            # a stand-in run of the task: every pair's resolve rates over its trials
            usable = [(e, c) for e, c in pairs[r.benchmark] if e in outcomes and c in outcomes]
            pe = [outcomes[e].rate for e, _ in usable]
            partners = [c for _, c in usable]
        if not pe:
            continue
        pc = [outcomes[c].rate for c in partners]
        n = len(pe)
        g = sum(c * (1.0 - e) for e, c in zip(pe, pc, strict=True)) / n
        loss = sum(e * (1.0 - c) for e, c in zip(pe, pc, strict=True)) / n
        rel = [outcomes[c].cost / typical[r.benchmark][c] for c in partners if typical[r.benchmark].get(c)]
        log_cost = sum(math.log(max(v, 1e-3)) for v in rel) / len(rel) if rel else 0.0
        w = n / (len(r.points) * runs_of_task[(r.benchmark, r.task)])
        key = f"{r.benchmark}/{r.task}"
        for x in r.points:
            per_benchmark.setdefault(r.benchmark, []).append(len(out.x))
            out.x.append(x)
            out.gain.append(g)
            out.loss.append(loss)
            out.weight.append(w)
            out.task.append(key)
            out.cost.append(log_cost)
    # every benchmark weighs the same in total
    for idx in per_benchmark.values():
        total = sum(out.weight[i] for i in idx)
        for i in idx:
            out.weight[i] /= total
    return out


def _typical_costs(corpus: Corpus) -> dict[str, dict[str, float]]:
    """Per benchmark and model, the mean cost per task (the unit of the relative cost label)."""
    out: dict[str, dict[str, float]] = {}
    for benchmark, tasks in corpus.outcomes.items():
        sums: dict[str, list[float]] = {}
        for per in tasks.values():
            for model, o in per.items():
                sums.setdefault(model, []).append(o.cost)
        out[benchmark] = {m: sum(v) / len(v) for m, v in sums.items() if sum(v) > 0}
    return out


def _fit(x: Any, y: Any, w: Any, l2: float, steps: int, *, linear: bool = False) -> tuple[float, Any]:
    """Weighted logistic regression (soft labels) — or, ``linear``, least squares — by Nesterov's
    method; returns (bias, weights).

    ``x`` is a scipy CSR matrix or a dense numpy array (both support ``@`` and ``.T``)."""
    import numpy as np

    w = w / w.sum()
    d = x.shape[1]
    sw = np.sqrt(w)
    # Lipschitz bound of the gradient: 0.25·‖diag(√w)·[1 X]‖² + l2 (power iteration, fixed start)
    v = np.ones(d + 1) / math.sqrt(d + 1)
    for _ in range(30):
        u = sw * (v[0] + x @ v[1:])
        v = np.concatenate([[float(sw @ u)], x.T @ (sw * u)])
        v /= np.linalg.norm(v) or 1.0
    top = float(np.linalg.norm(sw * (v[0] + x @ v[1:])))
    step = 1.0 / ((1.0 if linear else 0.25) * top**2 + l2)
    beta = np.zeros(d + 1)
    prev = beta.copy()
    for k in range(1, steps + 1):
        z = beta + (k - 1) / (k + 2) * (beta - prev)
        logits = z[0] + x @ z[1:]
        p = logits if linear else 1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))
        r = w * (p - y)
        grad = np.concatenate([[r.sum()], x.T @ r + l2 * z[1:]])
        prev = beta
        beta = z - step * grad
    return float(beta[0]), beta[1:]


def _matrix(rows: Rows, width: int) -> Any:
    """The rows as a sparse CSR matrix (scipy, installed with scikit-learn) or, without scipy, dense."""
    import numpy as np

    indptr, indices, data = [0], [], []
    for vec in rows.x:
        for j in sorted(vec):
            if j < width:
                indices.append(j)
                data.append(vec[j])
        indptr.append(len(indices))
    try:
        from scipy.sparse import csr_matrix
    except ImportError:  # numpy only: dense (slower, same result)
        x = np.zeros((len(rows.x), width))
        for i in range(len(rows.x)):
            x[i, indices[indptr[i] : indptr[i + 1]]] = data[indptr[i] : indptr[i + 1]]
        return x
    return csr_matrix((np.array(data), np.array(indices), np.array(indptr)), shape=(len(rows.x), width))


def member_draws(tasks: Sequence[str], config: TrainConfig) -> list[list[int]]:
    """Each ensemble member's task bootstrap: indices into the sorted distinct ``tasks`` (seeded).

    :func:`fit` weighs rows by these draws and the held-out scoring reads its out-of-bag tasks
    from them, so the two cannot drift apart.
    """
    n = len(set(tasks))
    rng = random.Random(config.seed)
    return [[rng.randrange(n) for _ in range(n)] for _ in range(config.members)]


def fit(rows: Rows, config: TrainConfig, training: dict[str, Any] | None = None) -> TrajectoryModel:
    """Fits the ensemble on ``rows``.

    Raises:
        ValueError: No rows.
    """
    import numpy as np

    if not rows.x:
        raise ValueError("no training rows (check the data folder and the exclusions)")
    width = len(DENSE) + config.dims
    x = _matrix(rows, width)
    yg, yl = np.array(rows.gain), np.array(rows.loss)
    base_w = np.array(rows.weight)
    tasks = sorted(set(rows.task))
    index = {t: i for i, t in enumerate(tasks)}
    task_of = np.array([index[t] for t in rows.task])
    yc = np.array(rows.cost) if len(rows.cost) == len(rows.x) else None
    members: list[tuple[Head, Head]] = []
    cost: list[Head] = []
    for draw in member_draws(rows.task, config):
        counts = np.bincount(draw, minlength=len(tasks))
        w = base_w * counts[task_of]
        heads = []
        for y in (yg, yl):
            bias, beta = _fit(x, y, w, config.l2, config.steps)
            heads.append(Head(round(bias, 6), tuple(round(float(b), 6) for b in beta)))
        members.append((heads[0], heads[1]))
        if yc is not None and config.cost:
            bias, beta = _fit(x, yc, w, config.l2, config.steps, linear=True)
            cost.append(Head(round(bias, 6), tuple(round(float(b), 6) for b in beta)))
    return TrajectoryModel(config.dims, tuple(members), dict(training or {}), cost=tuple(cost))


def describe(config: TrainConfig, rows: Rows) -> dict[str, Any]:
    """The ``training`` block a checkpoint records."""
    return {
        "dims": config.dims,
        "members": config.members,
        "l2": config.l2,
        "steps": config.steps,
        "seed": config.seed,
        "rows": len(rows.x),
        "tasks": len(set(rows.task)),
    }


def task_keys(rows: Rows) -> Sequence[str]:
    """The tasks the rows come from, sorted."""
    return sorted(set(rows.task))
