"""Leave one benchmark out over all of ``../shared/data``, with graded (judge) outcomes trained on.

Issue 46's deciding table (docs/learned-routers.md, "Graded outcomes"). Eleven benchmarks: the 7
of routerdc-7models (Mistral-7B vs dolphin-2.9-llama3-8B), the 3 of routellm-evals (Mixtral-8x7B
vs GPT-4-1106; contaminated prompts out) and AlpacaEval's 805 instructions
(``Mixtral-8x7B-Instruct-v0.1_concise`` vs GPT-4 Turbo, ``gpt4_1106_preview``). Every fold trains
on the others and scores APGR (``switchyard.eval.metrics.evaluate_scores``) on the left-out
benchmark's own recorded outcomes — RouterDC's fractions, MT-Bench's grades and AlpacaEval's
preferences as they are.

Training labels are good-enough labels (``switchyard.eval.good_enough``: each outcome type cut at
its documented bar), so 0/1 correctness, fractions, 1-10 grades and preferences are never
averaged; only labels are mixed, with per-source weights.

Recipes (``--recipes``):

* ``default`` — issue 25's recipe: the joint linear head (``train_linear``) on the other
  *binary* benchmarks of the left-out benchmark's own file; MT-Bench and AlpacaEval never
  trained on. AlpacaEval's fold uses RouteLLM's MMLU + GSM8K (what the shipped checkpoint saw).
* ``graded`` — the same head on the other benchmarks of the same file *plus* the graded ones
  (MT-Bench, AlpacaEval) unless left out; every row weight 1.
* ``graded-w`` — ``graded`` with each open-ended source (MT-Bench, AlpacaEval) weighted so its
  total equals a quarter of the rest's (``OPEN_SHARE``).
* ``graded-pooled`` — ``graded-w`` over all three files.
* ``graded-hard`` — ``graded-w``'s checkpoint scored ``1 - P(efficient good enough)``.

Features: ``lobo_features.py``'s 768-component PCA of the default recipe's SmolLM2 states of
every prompt of the three files (``texts`` writes them in this file's order).

Usage::

    python benchmarks/lobo_graded.py texts --out texts.jsonl.gz      # then lobo_features.py
    OMP_NUM_THREADS=1 python benchmarks/lobo_graded.py score --features .features/lobo3 \\
        --recipes default,graded,graded-w --json results/lobo_graded.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lobo

ALPACA = ("alpaca-eval/alpaca_eval_gpt4_turbo.jsonl", "Mixtral-8x7B-Instruct-v0.1_concise", "gpt4_1106_preview")
OPEN = ("mt_bench", "alpaca_eval")
"""Open-ended benchmarks (graded by a judge)."""
OPEN_SHARE = 0.25
"""``graded-w``: each open-ended source's total weight, as a share of the binary rows' total."""


@dataclass
class Data3:
    """Rows of the three files, aligned with the feature rows (ids in ``texts`` order)."""

    ids: list[str]
    texts: list[str]
    file: np.ndarray
    bench: np.ndarray
    keep: np.ndarray
    eff: np.ndarray  # recorded outcome (scored as it is)
    cap: np.ndarray
    eff_ok: np.ndarray  # good-enough label (trained on)
    cap_ok: np.ndarray


def load() -> Data3:
    """routerdc + routellm through ``lobo.load``, then AlpacaEval; labels by ``GoodEnough``."""
    from switchyard.eval.good_enough import GoodEnough
    from switchyard.probe.data import read_rows

    d = lobo.load()
    rule = GoodEnough()
    types = {"routerdc": "score_0_1", "routellm": "binary_correct"}
    kinds = [
        "gpt4_judge_score_1_to_10" if b == "mt_bench" else types[str(f)]
        for f, b in zip(d.file.tolist(), d.bench.tolist(), strict=True)
    ]
    rel, weak, strong = ALPACA
    rows, _ = read_rows(lobo.DATA / rel, {"efficient": weak, "capable": strong})
    n = len(rows)
    kinds += ["gpt4_turbo_judge_preference_0_1"] * n
    eff = np.concatenate([d.eff, rows.quality["efficient"]])
    cap = np.concatenate([d.cap, rows.quality["capable"]])

    def labels(q: np.ndarray) -> np.ndarray:
        # routellm's 0/1 rows are binary; every other type is cut at its bar
        return np.array(
            [rule.label(float(v), binary=k == "binary_correct", outcome_type=k) for v, k in zip(q, kinds, strict=True)]
        )

    return Data3(
        d.ids + rows.ids,
        d.texts + rows.texts,
        np.concatenate([d.file, np.array(["alpaca"] * n)]),
        np.concatenate([d.bench, np.array(["alpaca_eval"] * n)]),
        np.concatenate([d.keep, np.ones(n, bool)]),
        eff,
        cap,
        labels(eff),
        labels(cap),
    )


def write_texts(d: Data3, path: str) -> None:
    """``{id, text}`` per row, in feature order (``lobo_features.py --texts``)."""
    with gzip.open(path, "wt") as fh:
        for i, text in zip(d.ids, d.texts, strict=True):
            fh.write(json.dumps({"id": i, "text": text}) + "\n")


RECIPES = ("default", "graded", "graded-w", "graded-pooled", "graded-hard")


def fold_rows(name: str, d: Data3, fname: str, bench: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The training rows of ``name``'s fold leaving ``fname/bench`` out, and their weights."""
    binary = ~np.isin(d.bench, OPEN)
    out = (d.bench != bench) & d.keep
    if name == "default":
        home = "routellm" if fname == "alpaca" else fname
        return (d.file == home) & binary & out, None
    if name == "graded-pooled":
        rows = out
    else:
        home = "routellm" if fname == "alpaca" else fname
        rows = ((d.file == home) | np.isin(d.bench, OPEN)) & out
    if name == "graded":
        return rows, None
    w = np.ones(len(d.ids))
    n_bin = float((rows & binary).sum())
    for src in OPEN:
        m = rows & (d.bench == src)
        if m.any():
            w[m] = OPEN_SHARE * n_bin / float(m.sum())
    return rows, w[rows]


def fit(
    z_tr: np.ndarray, eff_ok: np.ndarray, cap_ok: np.ndarray, w: np.ndarray | None, cs: tuple[float, ...] = ()
) -> Any:
    """:func:`fit_linear`'s checkpoint."""
    return fit_linear(z_tr, eff_ok, cap_ok, w, cs).checkpoint


def fit_linear(
    z_tr: np.ndarray, eff_ok: np.ndarray, cap_ok: np.ndarray, w: np.ndarray | None, cs: tuple[float, ...] = ()
) -> Any:
    """The default head (``train_linear``, joint link, fold's whitened PCA 32) on good-enough labels
    (``cs``: the regularisation strengths to choose from; default the library's grid)."""
    import switchyard.probe.sk_train as sk
    from switchyard.protocol.features import FeatureRecipe

    y = np.stack([eff_ok, cap_ok], axis=1).astype(np.float64)
    recipe = FeatureRecipe(source="lobo", model="pca768", layers=(0,), pooling=("mean",), hidden_size=z_tr.shape[1])
    original = sk.fit_whitened_pca
    sk.fit_whitened_pca = lobo.no_scaler_pca  # type: ignore[assignment]
    try:
        params = sk.LinearParams(cs=cs or sk.C_GRID)
        return sk.train_linear(z_tr.astype(np.float32), y, ["efficient", "capable"], recipe, params, weights=w)
    finally:
        sk.fit_whitened_pca = original  # type: ignore[assignment]


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error (``switchyard.eval.reliability``)."""
    from switchyard.eval.reliability import reliability

    return reliability(p.tolist(), y.tolist(), bins=bins).ece


def run(names: list[str], d: Data3, z: np.ndarray) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """APGR per recipe and left-out benchmark; USD saved at 95 % and the raw ECE alongside."""
    from switchyard.eval.metrics import evaluate_scores

    apgr: dict[str, dict[str, float]] = {}
    extra: dict[str, Any] = {}
    keys = [(f, b) for f in ("routerdc", "routellm", "alpaca") for b in sorted(set(d.bench[(d.file == f) & d.keep]))]
    for name in names:
        t0 = time.perf_counter()
        for fname, b in keys:
            test = (d.file == fname) & (d.bench == b) & d.keep
            rows, w = fold_rows(name, d, fname, b)
            cp = fit(z[rows], d.eff_ok[rows], d.cap_ok[rows], w)
            probs = cp.predict(z[test].astype(np.float32))
            score = 1.0 - probs[:, 0] if name.endswith("-hard") else 0.5 * (1.0 + probs[:, 1] - probs[:, 0])
            r = evaluate_scores(
                [float(s) for s in score],
                d.cap[test].tolist(),
                d.eff[test].tolist(),
                strong_cost=[24.7] * int(test.sum()),
                weak_cost=[0.24] * int(test.sum()),
            )
            key = f"{fname}/{b}"
            apgr.setdefault(name, {})[key] = float(r.apgr) if r.apgr is not None else float("nan")
            pp = np.concatenate([probs[:, 0], probs[:, 1]])
            yy = np.concatenate([d.eff_ok[test], d.cap_ok[test]])
            extra.setdefault(name, {})[key] = {
                "usd_saved_at_95": (r.usd_saved_at_95 or 0.0) / r.capable_cost_usd if r.capable_cost_usd else None,
                "ece": ece(pp, yy),
                "n": int(test.sum()),
                "train": int(rows.sum()),
            }
            lobo.SCORES.setdefault(name, {})[key] = np.asarray(score, dtype=np.float64)
            print(f"  {name:14} {key:26} APGR {apgr[name][key]:.3f}", file=sys.stderr, flush=True)
        print(f"{name}: {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    return apgr, extra


def table(apgr: dict[str, dict[str, float]], extra: dict[str, Any]) -> str:
    """The markdown table of docs/learned-routers.md."""
    names = list(apgr)
    keys = list(apgr[names[0]])
    lines = ["| left out | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {k} | " + " | ".join(f"{apgr[n][k]:.3f}" for n in names) + " |" for k in keys]
    for label, sel in (
        ("mean, routerdc (7)", [k for k in keys if k.startswith("routerdc/")]),
        ("mean, routellm + AlpacaEval (4)", [k for k in keys if not k.startswith("routerdc/")]),
        (f"**mean, all {len(keys)}**", keys),
    ):
        lines.append(f"| {label} | " + " | ".join(f"{np.mean([apgr[n][k] for k in sel]):.3f}" for n in names) + " |")
    lines.append(
        "| USD saved @95 %, mean | "
        + " | ".join(f"{np.mean([extra[n][k]['usd_saved_at_95'] or 0.0 for k in keys]):.1%}" for n in names)
        + " |"
    )
    lines.append(
        "| ECE (raw P(success)), mean | "
        + " | ".join(f"{np.mean([extra[n][k]['ece'] for k in keys]):.3f}" for n in names)
        + " |"
    )
    return "\n".join(lines)


TOLERANCES = (0.0, 0.02, 0.05, 0.1, 0.2)
"""``calibration``: the tolerance policy's capable share and quality at these ``τ``."""


def calibration_check(
    d: Data3, z: np.ndarray, test_ids: frozenset[str], folds: int = 5, dev_only: bool = False
) -> dict[str, Any]:
    """ECE of the default recipe's P(success), raw and isotonic-calibrated on out-of-fold
    predictions of the training rows (``train-probe``'s calibration step), on RouteLLM's test
    split, on MT-Bench, and on every left-out benchmark of the ``default`` LOBO folds."""
    from switchyard.eval.metrics import evaluate_scores
    from switchyard.probe.calibration_fit import fit_calibration, out_of_fold

    def fit_and_score(rows: np.ndarray, tests: dict[str, np.ndarray]) -> dict[str, Any]:
        y = np.stack([d.eff_ok[rows], d.cap_ok[rows]], axis=1)
        full = fit_linear(z[rows], y[:, 0], y[:, 1], None)
        cp = full.checkpoint
        chosen = tuple(float(v["C"]) for v in full.chosen.values())  # the out-of-fold models reuse it

        def retrain(xa: Any, ya: Any, wa: Any) -> Any:
            return fit(xa, ya[:, 0], ya[:, 1], None, chosen)

        oof = out_of_fold(retrain, z[rows], y, None, list(d.bench[rows]), folds, 0)
        cal = fit_calibration(oof, y, ["efficient", "capable"], "")
        out = {}
        for name, test in tests.items():
            probs = cp.predict(z[test].astype(np.float32))
            after = np.array([cal.apply(["efficient", "capable"], [float(a), float(b)]) for a, b in probs])
            labels = np.concatenate([d.eff_ok[test], d.cap_ok[test]])
            score = 0.5 * (1.0 + probs[:, 1] - probs[:, 0])
            r = evaluate_scores(score.tolist(), d.cap[test].tolist(), d.eff[test].tolist())
            tol = {}
            for tau in TOLERANCES:  # the cost-aware policy on the calibrated P(success)
                cap_pick = ~(after[:, 0] >= after[:, 1] - tau)
                q = np.where(cap_pick, d.cap[test], d.eff[test]).mean()
                tol[str(tau)] = {
                    "capable_share": float(cap_pick.mean()),
                    "quality_vs_capable": float(q / d.cap[test].mean()),
                }
            out[name] = {
                "tolerance": tol,
                "n": int(test.sum()),
                "apgr": r.apgr,
                "ece_raw": ece(np.concatenate([probs[:, 0], probs[:, 1]]), labels),
                "ece_calibrated": ece(np.concatenate([after[:, 0], after[:, 1]]), labels),
            }
            print(f"  {name:26} {out[name]}", file=sys.stderr, flush=True)
        return out

    in_test = np.array([i in test_ids for i in d.ids])
    routellm = (d.file == "routellm") & d.keep
    train = routellm & np.isin(d.bench, ("mmlu", "gsm8k")) & ~in_test
    results = {
        "dev": fit_and_score(train, {"test": routellm & in_test, "mt_bench": routellm & (d.bench == "mt_bench")})
    }
    keys = [(f, b) for f in ("routerdc", "routellm", "alpaca") for b in sorted(set(d.bench[(d.file == f) & d.keep]))]
    for fname, b in [] if dev_only else keys:
        rows, _ = fold_rows("default", d, fname, b)
        test = (d.file == fname) & (d.bench == b) & d.keep
        results[f"{fname}/{b}"] = fit_and_score(rows, {f"{fname}/{b}": test})[f"{fname}/{b}"]
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("texts", help="write {id, text} of every row for lobo_features.py")
    t.add_argument("--out", required=True)
    s = sub.add_parser("score", help="leave-one-benchmark-out APGR per recipe")
    s.add_argument("--features", default=str(lobo.REPO / ".features/lobo3"))
    s.add_argument("--recipes", default="default,graded,graded-w")
    s.add_argument("--json")
    s.add_argument("--save-scores", help="write every recipe's left-out scores here (.npz)")
    c = sub.add_parser("calibration", help="ECE raw vs calibrated: test split, MT-Bench, every LOBO fold")
    c.add_argument("--features", default=str(lobo.REPO / ".features/lobo3"))
    c.add_argument("--json")
    c.add_argument("--dev-only", action="store_true", help="only the test split and MT-Bench (no LOBO folds)")
    args = p.parse_args(argv)
    d = load()
    if args.cmd == "texts":
        write_texts(d, args.out)
        return 0
    if args.cmd == "calibration":
        from switchyard.eval.dataset import read_ids

        z = lobo.load_features(Path(args.features), d.ids)
        out = calibration_check(d, z, read_ids(lobo.DATA / "routellm-evals/dev_test_ids.txt"), dev_only=args.dev_only)
        folds = [v for k, v in out.items() if k != "dev"] or [{"ece_raw": np.nan, "ece_calibrated": np.nan}]
        for k, v in out.items():
            print(f"{k}: {v}")
        print(
            f"LOBO mean ECE raw {np.mean([f['ece_raw'] for f in folds]):.3f}, "
            f"calibrated {np.mean([f['ece_calibrated'] for f in folds]):.3f}"
        )
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
        return 0
    names = args.recipes.split(",")
    for n in names:
        if n not in RECIPES:
            raise SystemExit(f"--recipes: unknown recipe {n!r} (one of {', '.join(RECIPES)})")
    z = lobo.load_features(Path(args.features), d.ids)
    apgr, extra = run(names, d, z)
    print(table(apgr, extra))
    if args.json:
        Path(args.json).write_text(json.dumps({"apgr": apgr, "extra": extra}, indent=1))
    if args.save_scores:
        np.savez(args.save_scores, **{f"{n}|{k}": v for n, per in lobo.SCORES.items() for k, v in per.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
