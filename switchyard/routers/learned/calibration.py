"""The calibration artifact: maps a learned router's P(success) per target onto observed rates.

Layer: ``routers`` — pure Python (no numpy), so serving reads it at no cost.

A checkpoint's head says how likely each target's answer is to be good enough, but a head
trained on one mix of data is rarely calibrated on another. ``switchyard train-probe`` fits one
monotone map per head on *held-out* predictions (out-of-fold: each training row predicted by a
model that did not see it) and writes it as ``calibration.json`` beside ``router.json``::

    {"format": "switchyard-calibration", "format_version": 1, "method": "isotonic",
     "checkpoint_sha256": "<sha256 of router.safetensors>",
     "heads": {"efficient": {"x": [0.02, …], "y": [0.0, …]}, "capable": {…}},
     "fitted_on": {…}, "report": {…}}

``isotonic`` heads are knots of a non-decreasing step function, read with linear
interpolation between knots and clipped at the ends (what scikit-learn's ``IsotonicRegression``
predicts); ``platt`` heads are ``{"a": …, "b": …}``: ``sigmoid(a · logit(p) + b)``. The file is
tied to the checkpoint it was fitted for by the digest of its weights, and versioned: a file of
another ``format_version`` or for other weights is refused at start-up with a message that says
what to do, never applied silently.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.routers.learned.checkpoint import CheckpointError

CALIBRATION_FILE = "calibration.json"
CALIBRATION_FORMAT = "switchyard-calibration"
CALIBRATION_VERSION = 1
"""The artifact's ``format_version`` this code reads and writes."""
METHODS = ("isotonic", "platt")


class CalibrationError(CheckpointError):
    """A calibration artifact that cannot be used (the message names the file and the fix)."""


@dataclass(slots=True, frozen=True)
class Curve:
    """One head's map from raw to calibrated probability.

    Attributes:
        method: ``isotonic`` or ``platt``.
        x: Isotonic knots (raw probabilities, increasing).
        y: Isotonic values at the knots (non-decreasing, in ``[0, 1]``).
        a: Platt slope on the logit.
        b: Platt offset.
    """

    method: str
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    a: float = 1.0
    b: float = 0.0

    def __call__(self, p: float) -> float:
        """The calibrated probability of raw ``p``."""
        if self.method == "platt":
            q = min(max(p, 1e-7), 1.0 - 1e-7)
            t = self.a * math.log(q / (1.0 - q)) + self.b
            return 1.0 / (1.0 + math.exp(-t)) if t >= 0 else math.exp(t) / (1.0 + math.exp(t))
        xs, ys = self.x, self.y
        if p <= xs[0]:
            return ys[0]
        if p >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, p)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 if x1 <= x0 else y0 + (y1 - y0) * (p - x0) / (x1 - x0)

    def to_dict(self) -> dict[str, Any]:
        """The head's JSON form."""
        if self.method == "platt":
            return {"a": self.a, "b": self.b}
        return {"x": list(self.x), "y": list(self.y)}


@dataclass(slots=True)
class Calibration:
    """Per-head calibration maps plus where they came from.

    Attributes:
        method: ``isotonic`` or ``platt``.
        heads: Checkpoint output name → its map.
        checkpoint_sha256: Digest of the ``router.safetensors`` it was fitted for.
        fitted_on: What the maps were fitted on (rows, folds, bars …; informational).
        report: Held-out calibration facts at training time (ECE before/after; informational).
    """

    method: str
    heads: dict[str, Curve]
    checkpoint_sha256: str
    fitted_on: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        """Short label for decision records: ``isotonic/v1/<first 12 hex of the digest>``."""
        return f"{self.method}/v{CALIBRATION_VERSION}/{self.checkpoint_sha256[:12]}"

    def apply(self, names: Sequence[str], probs: Sequence[float]) -> tuple[float, ...]:
        """Calibrated probabilities of ``probs`` (one per head ``names``; heads without a map pass)."""
        out = []
        for name, p in zip(names, probs, strict=True):
            curve = self.heads.get(name)
            out.append(float(p) if curve is None else min(1.0, max(0.0, curve(float(p)))))
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        """The artifact's JSON form."""
        return {
            "format": CALIBRATION_FORMAT,
            "format_version": CALIBRATION_VERSION,
            "method": self.method,
            "checkpoint_sha256": self.checkpoint_sha256,
            "heads": {name: curve.to_dict() for name, curve in self.heads.items()},
            "fitted_on": self.fitted_on,
            "report": self.report,
        }


def weights_digest(checkpoint_dir: str | Path) -> str:
    """SHA-256 of the checkpoint's ``router.safetensors`` (what a calibration is tied to)."""
    digest = hashlib.sha256()
    with (Path(checkpoint_dir) / "router.safetensors").open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save(calibration: Calibration, checkpoint_dir: str | Path) -> Path:
    """Writes ``calibration.json`` into ``checkpoint_dir``; returns its path."""
    path = Path(checkpoint_dir) / CALIBRATION_FILE
    path.write_text(json.dumps(calibration.to_dict(), indent=1) + "\n", encoding="utf-8")
    return path


def load(checkpoint_dir: str | Path, output_names: Sequence[str] | None = None) -> Calibration | None:
    """Reads and checks the checkpoint's ``calibration.json``; ``None`` when there is none.

    Args:
        checkpoint_dir: The checkpoint directory.
        output_names: The checkpoint's heads (every calibrated head must be one of them).

    Raises:
        CalibrationError: Not JSON, another format or ``format_version``, fitted for other
            weights, an unknown method or head, or a malformed map.
    """
    path = Path(checkpoint_dir) / CALIBRATION_FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != CALIBRATION_FORMAT:
        raise CalibrationError(f"{path}: not a switchyard calibration artifact (format {CALIBRATION_FORMAT!r})")
    version = raw.get("format_version")
    if version != CALIBRATION_VERSION:
        raise CalibrationError(
            f"{path}: format_version {version!r}, but this switchyard reads calibration format_version "
            f"{CALIBRATION_VERSION}; re-fit it with the matching `switchyard train-probe` (or delete the file "
            "to serve uncalibrated probabilities)"
        )
    method = raw.get("method")
    if method not in METHODS:
        raise CalibrationError(f"{path}: method must be one of {list(METHODS)}, got {method!r}")
    digest = raw.get("checkpoint_sha256")
    actual = weights_digest(checkpoint_dir)
    if digest != actual:
        raise CalibrationError(
            f"{path}: fitted for other weights (checkpoint_sha256 {str(digest)[:12]}…, router.safetensors is "
            f"{actual[:12]}…); retrain the checkpoint and its calibration together with `switchyard train-probe`"
        )
    heads = raw.get("heads")
    if not isinstance(heads, dict) or not heads:
        raise CalibrationError(f"{path}: heads must be a non-empty object of head name -> map")
    curves = {str(name): _curve(path, str(name), method, spec) for name, spec in heads.items()}
    if output_names is not None:
        unknown = sorted(set(curves) - set(output_names))
        if unknown:
            raise CalibrationError(f"{path}: heads {unknown} are not in the checkpoint's heads {list(output_names)}")
    return Calibration(
        method,
        curves,
        str(digest),
        dict(raw.get("fitted_on") or {}),
        dict(raw.get("report") or {}),
    )


def _curve(path: Path, name: str, method: str, spec: Any) -> Curve:
    where = f"{path}: heads.{name}"
    if not isinstance(spec, Mapping):
        raise CalibrationError(f"{where} must be an object")
    if method == "platt":
        a, b = spec.get("a"), spec.get("b")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (a, b)):
            raise CalibrationError(f"{where}: platt needs finite numbers a and b")
        assert isinstance(a, int | float) and isinstance(b, int | float)
        return Curve("platt", a=float(a), b=float(b))
    xs, ys = spec.get("x"), spec.get("y")
    if not isinstance(xs, list) or not isinstance(ys, list) or not xs or len(xs) != len(ys):
        raise CalibrationError(f"{where}: isotonic needs lists x and y of one length (at least 1)")
    try:
        x = tuple(float(v) for v in xs)
        y = tuple(float(v) for v in ys)
    except (TypeError, ValueError):
        raise CalibrationError(f"{where}: x and y must hold numbers") from None
    if any(not 0.0 <= v <= 1.0 for v in (*x, *y)):
        raise CalibrationError(f"{where}: x and y must lie in [0, 1]")
    if any(b < a for a, b in itertools.pairwise(x)) or any(b < a for a, b in itertools.pairwise(y)):
        raise CalibrationError(f"{where}: x and y must be non-decreasing")
    return Curve("isotonic", x=x, y=y)


__all__ = [
    "CALIBRATION_FILE",
    "CALIBRATION_VERSION",
    "Calibration",
    "CalibrationError",
    "Curve",
    "load",
    "save",
    "weights_digest",
]
