"""Train and score routers on cached feature files, per slice and across sources.

Reads the PCA feature files written by ``benchmarks/extract_features.py`` and the outcomes of
``routellm_evals.jsonl``; trains on scikit-learn (scaler, logistic regression, kNN, MLP,
cross-validated choice of the regularisation) plus a matrix-factorisation router in the style of
RouteLLM's ``mf`` (trained on pairwise outcomes) and a joint-outcome multinomial regression
(``--link joint``), and scores each with
``switchyard.eval.metrics`` — the code behind ``switchyard eval``.

Slices: ``test`` (RouteLLM's fixed 3,068 test ids; trained on the other MMLU+GSM8K rows),
``mt_bench`` (72 uncontaminated questions, judge scores, never trained on), and the cross-source
runs ``mmlu->gsm8k`` (train on MMLU training rows, score all GSM8K rows) and ``gsm8k->mmlu``.
USD saved uses RouteLLM's blended list prices as a flat per-call cost ($24.7 vs $0.24 per Mtok;
the source has no per-prompt cost): saved = always-capable's cost minus the cost at the cheapest
threshold keeping 95% of always-capable's quality.

Usage::

    python benchmarks/router_compare.py --data ../shared/data/routellm-evals/routellm_evals.jsonl \\
        --test-ids ../shared/data/routellm-evals/dev_test_ids.txt \\
        --features .features/minilm-all.npy --features .features/smollm-all9.npy --json results.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

STRONG = "gpt-4-1106-preview"
WEAK = "mistralai/Mixtral-8x7B-Instruct-v0.1"
COST = (24.7, 0.24)


def load_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open("rb") as fh:
        for line in fh:
            obj = json.loads(line)
            m = obj["models"]
            if obj["benchmark"] == "mt_bench":
                s, w = m[STRONG]["score"], m[WEAK]["score"]
            else:
                s, w = float(m[STRONG]["correct"]), float(m[WEAK]["correct"])
            rows.append(
                {
                    "id": obj["id"],
                    "benchmark": obj["benchmark"],
                    "contaminated": bool(obj.get("routellm_contaminated")),
                    "s": s,
                    "w": w,
                }
            )
    return rows


def bootstrap_sd(scores: Any, s: Any, w: Any, rounds: int, seed: int = 0) -> float:
    """Standard deviation of APGR over ``rounds`` resamples of the slice's items (with
    replacement): how much the number moves with which prompts happen to be in the slice."""
    import numpy as np

    from switchyard.eval.metrics import evaluate_scores

    rng = np.random.default_rng(seed)
    n = len(s)
    values = []
    for _ in range(rounds):
        pick = rng.integers(0, n, n)
        r = evaluate_scores(
            [float(v) for v in scores[pick]], s[pick], w[pick], strong_cost=[COST[0]] * n, weak_cost=[COST[1]] * n
        )
        values.append(r.apgr)
    return float(np.std(values))


def score_slice(scores: Any, s: Any, w: Any, bootstrap: int = 0) -> dict[str, Any]:
    from switchyard.eval.metrics import evaluate_scores

    n = len(s)
    r = evaluate_scores([float(v) for v in scores], s, w, strong_cost=[COST[0]] * n, weak_cost=[COST[1]] * n)
    saved = None if r.usd_saved_at_95 is None or not r.capable_cost_usd else r.usd_saved_at_95 / r.capable_cost_usd
    return {
        "n": n,
        "apgr": r.apgr,
        "cpt50": r.cpt50,
        "cpt80": r.cpt80,
        "usd_saved_at_95": saved,
        "share_at_95": None if r.at95 is None else r.at95.share,
        "apgr_sd": bootstrap_sd(scores, s, w, bootstrap) if bootstrap else None,
    }


class Heads:
    """One binary classifier per model; score = (1 + P(strong ok) - P(weak ok)) / 2."""

    def __init__(self, make: Any) -> None:
        self.make = make

    def fit(self, x: Any, s: Any, w: Any) -> Heads:
        self.ms = self.make().fit(x, s.astype(int))
        self.mw = self.make().fit(x, w.astype(int))
        return self

    def score(self, x: Any) -> Any:
        return (1 + self.ms.predict_proba(x)[:, 1] - self.mw.predict_proba(x)[:, 1]) / 2


class PairwiseMF:
    """The library's RouteLLM-style ``mf`` (``switchyard.probe.mf_train``) on the rows whose
    outcomes differ; score = P(strong does better than weak)."""

    def fit(self, x: Any, s: Any, w: Any) -> PairwiseMF:
        from switchyard.probe.mf_train import MatrixFactorisation, MFParams

        keep = s != w
        self.mf = MatrixFactorisation(MFParams(rank=16)).fit(x[keep], (s[keep] > w[keep]).astype(float))
        return self

    def score(self, x: Any) -> Any:
        return self.mf.score(x)


class Joint:
    """One multinomial regression over the joint outcome (``--link joint``); score = P(only
    strong) - P(only weak)."""

    def __init__(self, make: Any) -> None:
        self.make = make

    def fit(self, x: Any, s: Any, w: Any) -> Joint:
        self.m = self.make().fit(x, (w + 2 * s).astype(int))
        return self

    def score(self, x: Any) -> Any:
        p = self.m.predict_proba(x)
        cl = list(self.m.classes_)
        return (1 + p[:, cl.index(2)] - p[:, cl.index(1)]) / 2


def routers(dim: int) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def lr() -> Any:
        return make_pipeline(StandardScaler(), LogisticRegression(C=0.05, max_iter=2000))

    def lrcv() -> Any:
        return make_pipeline(
            StandardScaler(), LogisticRegressionCV(Cs=[0.003, 0.01, 0.03, 0.1, 0.3], cv=5, max_iter=2000)
        )

    def knn() -> Any:
        return KNeighborsClassifier(n_neighbors=100, weights="uniform")

    def mlp() -> Any:
        return make_pipeline(
            StandardScaler(),
            MLPClassifier((128,), alpha=1e-1, early_stopping=True, random_state=0, max_iter=200),
        )

    return {
        "logreg": lambda: Heads(lr),
        "logreg_cv": lambda: Heads(lrcv),
        "joint": lambda: Joint(lr),
        "knn100": lambda: Heads(knn),
        "mlp": lambda: Heads(mlp),
        "mf": lambda: PairwiseMF(),
    }


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--test-ids", required=True)
    ap.add_argument("--features", action="append", required=True, help="a .npy from extract_features.py")
    ap.add_argument("--dims", default="64", help="leading PCA components used (comma-separated to compare)")
    ap.add_argument("--only", help="comma-separated router names")
    ap.add_argument("--bootstrap", type=int, default=0, metavar="N", help="APGR's SD over N resamples")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = load_rows(Path(args.data))
    test = {ln.strip() for ln in Path(args.test_ids).read_text().splitlines() if ln.strip()}
    bench = np.array([r["benchmark"] for r in rows])
    clean = np.array([not r["contaminated"] for r in rows])
    in_test = np.array([r["id"] in test for r in rows])
    s = np.array([r["s"] for r in rows])
    w = np.array([r["w"] for r in rows])
    binary = (bench != "mt_bench") & clean
    train = binary & ~in_test
    # a seeded 15% validation split of the training rows: settings are chosen on it, never on test
    val = train & (np.random.default_rng(0).random(len(rows)) < 0.15)
    splits = {
        "val": (train & ~val, val),
        "test": (train, in_test),
        "mt_bench": (train, (bench == "mt_bench") & clean),
        "mmlu->gsm8k": (train & (bench == "mmlu"), binary & (bench == "gsm8k")),
        "gsm8k->mmlu": (train & (bench == "gsm8k"), binary & (bench == "mmlu") & in_test),
    }
    results: list[dict[str, Any]] = []
    rng = np.random.default_rng(0)
    for name, (_tr, te) in splits.items():
        results.append(
            {"features": "-", "router": "random", "slice": name, **score_slice(rng.random(te.sum()), s[te], w[te])}
        )
        results.append(
            {"features": "-", "router": "oracle", "slice": name, **score_slice((s[te] - w[te] + 1) / 2, s[te], w[te])}
        )
    only = set(args.only.split(",")) if args.only else None
    for feat_path in args.features:
        full = np.load(feat_path).astype(np.float64)
        for dim in [int(d) for d in args.dims.split(",")]:
            x = full[:, :dim]
            label = f"{Path(feat_path).stem}/pca{dim}"
            for rname, make in routers(dim).items():
                if only and rname not in only:
                    continue
                fitted: dict[bytes, Any] = {}
                for sname, (tr, te) in splits.items():
                    key = tr.tobytes()
                    if key not in fitted:
                        fitted[key] = make().fit(x[tr], s[tr], w[tr])
                    res = score_slice(fitted[key].score(x[te]), s[te], w[te], args.bootstrap)
                    results.append({"features": label, "router": rname, "slice": sname, **res})
                    print(
                        f"{label:28} {rname:10} {sname:12} APGR {res['apgr']:.3f}  CPT50 {res['cpt50']:.3f}  "
                        f"CPT80 {res['cpt80']:.3f}  saved@95 {res['usd_saved_at_95'] or 0:.3f}"
                        + (f"  (APGR SD {res['apgr_sd']:.3f})" if res["apgr_sd"] is not None else ""),
                        file=sys.stderr,
                        flush=True,
                    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
