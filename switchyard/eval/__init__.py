"""Offline evaluation, calibration and replay of routes on recorded outcomes.

Layer: ``eval`` — above ``api``/``config``, below ``cli``. Not imported by ``import switchyard``;
plots need the ``eval`` extra (matplotlib), imported only when a plot is drawn.

The metric functions (:mod:`switchyard.eval.metrics`, on the curve math of
:mod:`switchyard.eval.curves`) take plain sequences, so a learned router
can be scored without a config::

    from switchyard.eval import evaluate_scores
    report = evaluate_scores(probabilities, gpt4_correct, mixtral_correct)
    report.apgr, report.cpt50, report.cpt80

See docs/evaluation.md for the dataset format, the commands and the metric definitions.
"""

from switchyard.eval.calibrate import Calibration, CalibrationError, calibrate_budget, calibrate_share, share_at
from switchyard.eval.curves import Point, apgr, cpt, oracle_curve, pgr, threshold_curve
from switchyard.eval.dataset import Dataset, DatasetError, EvalItem, Outcome, outcome
from switchyard.eval.evaluate import EvalError, EvalResult, run_eval
from switchyard.eval.metrics import (
    Row,
    TwoTierReport,
    evaluate_choices,
    evaluate_decisions,
    evaluate_scores,
    target_baselines,
    two_tier_baselines,
)
from switchyard.eval.replay import ReplaySummary, TurnDecision, replay

__all__ = [
    "Calibration",
    "CalibrationError",
    "Dataset",
    "DatasetError",
    "EvalError",
    "EvalItem",
    "EvalResult",
    "Outcome",
    "Point",
    "ReplaySummary",
    "Row",
    "TurnDecision",
    "TwoTierReport",
    "apgr",
    "calibrate_budget",
    "calibrate_share",
    "cpt",
    "evaluate_choices",
    "evaluate_decisions",
    "evaluate_scores",
    "oracle_curve",
    "outcome",
    "pgr",
    "replay",
    "run_eval",
    "share_at",
    "target_baselines",
    "threshold_curve",
    "two_tier_baselines",
]
