"""Novelty and cost of the default recipe on benchmarks it never saw (issue 25, items 3 and the
USD target), on the leave-one-benchmark-out folds of ``benchmarks/lobo.py``.

Per fold (train on every other benchmark of the same file, as ``lobo.py``'s ``default``): the
head is the default recipe trained on all training rows. The novelty reference is fitted as
``train-probe`` fits it (:func:`switchyard.routers.learned.novelty.fit`: the mean distance to the
10 nearest reference rows in the checkpoint's own whitened PCA space, bound = 99th percentile of
held-out training rows) on 80 % of the training rows (by a hash of the id); the other 20 % are the
"training distribution" it should rarely fire on. Then, on the left-out benchmark:

* how often it fires there vs on those 20 %;
* APGR of the route's score as it is, with ``novelty: {action: capable}`` (novel prompts always
  go to the capable model) and with ``action: efficient``;
* capable share, quality and mean cost per call at the shipped operating point — the threshold
  that sends 30 % of the fold's training rows to the capable model — without and with each action;
* USD saved at >= 95 % of always-capable quality (``evaluate_scores``'s ``usd_saved_at_95``: the
  cheapest point of the threshold curve that keeps 95 % of always-capable's mean quality), as a
  share of always-capable's cost. Costs are flat per call, RouteLLM's blended list prices as
  docs/learned-routers.md uses them (capable 24.7, efficient 0.24 per call; ``--cost-per-call``),
  for both pairs: RouterDC records no costs and its two 7-8B models have no list price, so the
  RouterDC rows read as "what a 100x price gap would save". Beside it: what a random router saves
  (the straight line between the two models) — the part that needs no routing.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/lobo_novelty.py --features .features/lobo --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from lobo import FILES, REPO, fit_default, gain_score, load, load_features

COST = {"capable": 24.7, "efficient": 0.24}
ACTIONS = ("none", "capable", "efficient")


def acted(score: np.ndarray, novel: np.ndarray, action: str) -> np.ndarray:
    """The score a route with ``novelty: {action}`` effectively uses (forced tiers at the ends)."""
    if action == "capable":
        return np.where(novel, score.max() + 1.0, score)
    if action == "efficient":
        return np.where(novel, score.min() - 1.0, score)
    return score


def random_saved(qs: float, qw: float) -> float:
    """Share of always-capable's cost a random router saves at 95 % of its quality."""
    need = 0.0 if qw >= 0.95 * qs else min(1.0, (0.95 * qs - qw) / (qs - qw))
    return 1.0 - (need * COST["capable"] + (1.0 - need) * COST["efficient"]) / COST["capable"]


def fold(d, z, fname: str, b: str) -> dict[str, object]:
    """All measures for one left-out benchmark."""
    from switchyard.eval.metrics import evaluate_scores
    from switchyard.routers.learned import novelty

    test = (d.file == fname) & (d.bench == b) & d.keep
    train = (d.file == fname) & (d.bench != b) & d.keep & d.binary
    cp = fit_default(z[train], d.eff[train], d.cap[train])
    tr = np.flatnonzero(train)
    held = np.array([int(hashlib.sha256(d.ids[i].encode()).hexdigest(), 16) % 5 == 0 for i in tr])
    ref = novelty.fit(cp.project(z[tr[~held]]), seed=0)
    fires_in = float((ref.distance(cp.project(z[tr[held]])) > ref.bound).mean())
    novel = np.asarray(ref.distance(cp.project(z[test])) > ref.bound)
    # The shipped operating point: 30 % of the fold's training rows on the capable model.
    threshold = float(np.quantile(gain_score(cp, z[train]), 0.7))
    score = gain_score(cp, z[test])
    cap, eff = d.cap[test].tolist(), d.eff[test].tolist()
    n = len(cap)
    costs = {"strong_cost": [COST["capable"]] * n, "weak_cost": [COST["efficient"]] * n}
    out: dict[str, object] = {"n": n, "fires_train_dist": fires_in, "fires_left_out": float(novel.mean())}
    for action in ACTIONS:
        s = acted(score, novel, action)
        r = evaluate_scores(s.tolist(), cap, eff, threshold=threshold, **costs)
        out[action] = {
            "apgr": r.apgr,
            "capable_share": r.capable_share,
            "quality": r.quality,
            "cost_per_call": (r.cost_usd or 0.0) / n,
            "saved_at_95": (r.usd_saved_at_95 / r.capable_cost_usd) if r.usd_saved_at_95 is not None else None,
        }
        qs, qw = r.capable_quality, r.efficient_quality
    out |= {"capable_quality": qs, "efficient_quality": qw, "random_saved_at_95": random_saved(qs, qw)}
    print(f"  {fname}/{b}: {json.dumps(out)}", file=sys.stderr, flush=True)
    return out


def pct(x: object) -> str:
    return "—" if x is None else f"{100 * float(x):.1f} %"  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--features", default=str(REPO / ".features/lobo"))
    p.add_argument("--json")
    args = p.parse_args(argv)
    d = load()
    z = load_features(Path(args.features), d.ids)
    res = {
        f"{fname}/{b}": fold(d, z, fname, b)
        for fname in FILES
        for b in sorted(set(d.bench[(d.file == fname) & d.keep].tolist()))
    }
    keys = list(res)
    print("| left out | fires: training dist. | fires: left out | APGR | APGR, capable | APGR, efficient |")
    print("|---|---|---|---|---|---|")
    for k in [*keys, "mean"]:
        rows = [res[k]] if k != "mean" else list(res.values())

        def m(f, rows=rows):
            return float(np.mean([f(r) for r in rows]))

        print(
            f"| {k} | {pct(m(lambda r: r['fires_train_dist']))} | {pct(m(lambda r: r['fires_left_out']))} | "
            + " | ".join(f"{m(lambda r, a=a: r[a]['apgr']):.3f}" for a in ACTIONS)
            + " |"
        )
    print()
    print(
        "| left out | capable share at 30 % threshold: none / capable / efficient | cost per call: none / capable / "
        "efficient | quality: none / capable / efficient (capable alone, efficient alone) |"
    )
    print("|---|---|---|---|")
    for k in keys:
        r = res[k]
        shares = " / ".join(pct(r[a]["capable_share"]) for a in ACTIONS)  # type: ignore[index]
        cost = " / ".join(f"{r[a]['cost_per_call']:.2f}" for a in ACTIONS)  # type: ignore[index]
        qual = " / ".join(f"{r[a]['quality']:.3f}" for a in ACTIONS)  # type: ignore[index]
        print(f"| {k} | {shares} | {cost} | {qual} ({r['capable_quality']:.3f}, {r['efficient_quality']:.3f}) |")
    print()
    print(
        "| left out | efficient / capable quality | USD saved at 95 %: router | with action: capable | random router |"
    )
    print("|---|---|---|---|---|")
    for k in [*keys, "mean"]:
        rows = [res[k]] if k != "mean" else list(res.values())
        ratio = np.mean([r["efficient_quality"] / r["capable_quality"] for r in rows])  # type: ignore[operator]
        saved = [pct(np.mean([r[a]["saved_at_95"] or 0.0 for r in rows])) for a in ("none", "capable")]  # type: ignore[index]
        rnd = pct(np.mean([r["random_saved_at_95"] for r in rows]))
        print(f"| {k} | {ratio:.3f} | {saved[0]} | {saved[1]} | {rnd} |")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    print("command: OMP_NUM_THREADS=1 python benchmarks/lobo_novelty.py " + " ".join(argv or sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
