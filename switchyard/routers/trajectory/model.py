"""The trajectory router's checkpoint: a bootstrap ensemble of two logistic heads, in JSON.

Layer: ``routers`` — imports ``protocol`` only; pure Python (no numpy at inference).

Each ensemble member was trained on a bootstrap resample of the training tasks and holds two
logistic heads over the same sparse features (:mod:`switchyard.routers.trajectory.features`):

* ``gain`` — P(the capable model resolves the task and the efficient one does not);
* ``loss`` — P(the efficient model resolves it and the capable one does not).

The estimated gain of switching now is ``gain - loss`` (a switch that loses a task the efficient
model would have finished counts against it). Its interval is the spread of that difference over
the members (the 10th and 90th percentile): wide where the training runs disagree.

A member may carry a third, linear head, ``cost``: the log of the capable model's cost on the task
relative to its mean cost over the benchmark's tasks (multi-step tasks with long tool results cost
several times the typical one). ``rel_cost = exp(mean cost logit)`` prices a switch in units of a
typical task, so the router can rank runs by gain per cost.

File format (``format: switchyard-trajectory``, ``version: 1``): ``feature_version``, ``dims``
(hash buckets), ``dense`` (dense feature names, in order), ``members`` (``[{gain: {bias, w},
loss: {bias, w}, cost?: {bias, w}}]``, ``w`` a list of ``len(dense) + dims`` weights), ``training`` (how it was
made: data, pairs, command, held-out summary).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.intervals import quantile
from switchyard.routers.trajectory.features import DENSE, FEATURE_VERSION

FORMAT = "switchyard-trajectory"
VERSION = 1
BUILTIN = Path(__file__).with_name("trajectory-v1.json")
"""The shipped checkpoint (``switchyard train-trajectory`` wrote it; docs/trajectory-router.md)."""


class TrajectoryCheckpointError(ValueError):
    """A checkpoint that cannot be used (the message names the file and the field)."""


@dataclass(slots=True, frozen=True)
class Head:
    """One logistic head: ``sigmoid(bias + w · x)``."""

    bias: float
    w: tuple[float, ...]

    def logit(self, x: Mapping[int, float]) -> float:
        """The head's logit for a sparse vector (indices beyond ``w`` are ignored)."""
        w = self.w
        n = len(w)
        return self.bias + sum([w[i] * v for i, v in x.items() if i < n])


@dataclass(slots=True, frozen=True)
class Estimate:
    """The ensemble's estimate for one turn.

    Attributes:
        gain: Mean over members of P(capable resolves, efficient does not) - P(the reverse).
        low: 10th percentile of the members' gains.
        high: 90th percentile of the members' gains.
        p_gain: Mean P(capable resolves, efficient does not).
        p_loss: Mean P(efficient resolves, capable does not).
        rel_cost: The capable model's expected cost on this task relative to a typical task (1.0
            without a cost head).
    """

    gain: float
    low: float
    high: float
    p_gain: float
    p_loss: float
    rel_cost: float = 1.0


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass(slots=True, frozen=True)
class TrajectoryModel:
    """A loaded checkpoint.

    Attributes:
        dims: Hash buckets of the task n-grams and error classes.
        members: ``(gain head, loss head)`` per ensemble member.
        cost: One ``cost`` head per member, or none.
        training: How it was trained (free-form, recorded as written).
        path: Where it was read from.
    """

    dims: int
    members: tuple[tuple[Head, Head], ...]
    training: Mapping[str, Any]
    path: str = ""
    cost: tuple[Head, ...] = ()

    def estimate(self, x: Mapping[int, float]) -> Estimate:
        """The ensemble's gain estimate for one sparse feature vector."""
        gains, pg, pl = [], 0.0, 0.0
        for g, loss in self.members:
            a, b = _sigmoid(g.logit(x)), _sigmoid(loss.logit(x))
            gains.append(a - b)
            pg += a
            pl += b
        n = len(self.members)
        rel = math.exp(max(-5.0, min(5.0, sum(h.logit(x) for h in self.cost) / len(self.cost)))) if self.cost else 1.0
        ordered = sorted(gains)
        return Estimate(sum(gains) / n, quantile(ordered, 0.1), quantile(ordered, 0.9), pg / n, pl / n, rel)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (see the module docstring)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "feature_version": FEATURE_VERSION,
            "dims": self.dims,
            "dense": list(DENSE),
            "members": [
                {
                    name: {"bias": h.bias, "w": list(h.w)}
                    for name, h in (("gain", g), ("loss", loss), ("cost", self.cost[i] if self.cost else None))
                    if h is not None
                }
                for i, (g, loss) in enumerate(self.members)
            ],
            "training": dict(self.training),
        }


def _head(raw: Any, width: int, where: str) -> Head:
    if not isinstance(raw, dict) or not isinstance(raw.get("bias"), int | float) or not isinstance(raw.get("w"), list):
        raise TrajectoryCheckpointError(f"{where}: needs {{bias: number, w: [numbers]}}")
    w = raw["w"]
    if len(w) != width or not all(isinstance(v, int | float) and math.isfinite(v) for v in w):
        raise TrajectoryCheckpointError(f"{where}.w: needs {width} finite numbers, got {len(w)} entries")
    return Head(float(raw["bias"]), tuple(float(v) for v in w))


def from_dict(data: Any, path: str = "") -> TrajectoryModel:
    """Validates a checkpoint's JSON form.

    Raises:
        TrajectoryCheckpointError: Wrong format, version, feature version or shapes.
    """
    where = path or "checkpoint"
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TrajectoryCheckpointError(f"{where}: not a trajectory checkpoint (format must be {FORMAT!r})")
    if data.get("version") != VERSION:
        raise TrajectoryCheckpointError(f"{where}: version {data.get('version')!r}; this switchyard reads {VERSION}")
    if data.get("feature_version") != FEATURE_VERSION:
        raise TrajectoryCheckpointError(
            f"{where}: feature_version {data.get('feature_version')!r}, this switchyard computes "
            f"{FEATURE_VERSION}; retrain with `switchyard train-trajectory`"
        )
    if data.get("dense") != list(DENSE):
        raise TrajectoryCheckpointError(f"{where}: dense feature names differ from this switchyard's")
    dims = data.get("dims")
    if not isinstance(dims, int) or dims < 1:
        raise TrajectoryCheckpointError(f"{where}: dims must be a positive integer")
    raw_members = data.get("members")
    if not isinstance(raw_members, list) or not raw_members:
        raise TrajectoryCheckpointError(f"{where}: members must be a non-empty list")
    width = len(DENSE) + dims
    members = []
    cost = []
    for i, m in enumerate(raw_members):
        if not isinstance(m, dict):
            raise TrajectoryCheckpointError(f"{where}: members[{i}] must be an object")
        members.append(
            (
                _head(m.get("gain"), width, f"{where}: members[{i}].gain"),
                _head(m.get("loss"), width, f"{where}: members[{i}].loss"),
            )
        )
        if "cost" in m:
            cost.append(_head(m["cost"], width, f"{where}: members[{i}].cost"))
    if cost and len(cost) != len(members):
        raise TrajectoryCheckpointError(f"{where}: every member needs a cost head, or none does")
    training = data.get("training") or {}
    return TrajectoryModel(dims, tuple(members), training if isinstance(training, dict) else {}, path, tuple(cost))


def load(path: str | Path | None = None) -> TrajectoryModel:
    """Reads and validates a checkpoint (default: the shipped one).

    Raises:
        TrajectoryCheckpointError: Missing, unreadable or malformed file.
    """
    p = BUILTIN if path is None else Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TrajectoryCheckpointError(f"cannot read trajectory checkpoint {p}: {exc}") from exc
    return from_dict(data, str(p))
