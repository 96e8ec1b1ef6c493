"""Leave one benchmark out: train a router on every other benchmark, score APGR on the one left out.

Issue 25's deciding number for the default recipe. Benchmarks: the 7 of routerdc-7models
(efficient = ``mistralai/Mistral-7B-v0.1``, the plain 7B base model; capable =
``cognitivecomputations/dolphin-2.9-llama3-8b``, the best mean score of the seven) and the 3 of
routellm-evals (Mixtral-8x7B vs GPT-4-1106; RouteLLM's contaminated prompts left out; MT-Bench's
judge scores are scored, never trained on). APGR is ``switchyard.eval.metrics.evaluate_scores``,
the code behind ``switchyard eval --sweep``, on the left-out benchmark's own outcomes (RouterDC's
fractional scores as they are).

Features: the default recipe's SmolLM2 states, brought back from the GPU by
``benchmarks/lobo_features.py`` as a 768-component PCA of the standardised 10,368 columns (93 %
of their variance; fitted on all prompts, no outcomes). Inside each fold every recipe fits its
own centring → whitened PCA 32 on the fold's training rows only, as ``train-probe`` does.

Recipes (``--recipes``, comma-separated):

* ``default`` — today's: ``switchyard.probe.sk_train.train_linear`` (joint multinomial logistic
  regression, ``C`` by 5-fold CV, temperature-calibrated), trained on the other benchmarks of the
  same file; routing score ``(1 + P(capable) - P(efficient)) / 2`` from the checkpoint.
  RouterDC's fractional scores are cut at 0.5 for training (the joint link needs 0/1 outcomes).
* ``centred`` — the same head on features normalised against the prompt's format: each
  benchmark's mean feature vector is subtracted from its prompts (the left-out benchmark's own
  mean from its prompts: no outcomes, what a running mean of a traffic source gives), so the head
  learns difficulty within a format instead of which format needs the capable model.
* ``irt`` — per-model ability x item difficulty: one logistic regression on (prompt, model)
  pairs, ``logit P(model m solves x) = a_m - d(x)``, ``d`` linear in the whitened PCA, trained
  with *every* model's outcomes (all 7 RouterDC models; fractional scores as weights); score
  ``d(x)`` (harder → capable).
* ``irt-centred`` — ``irt`` on centred features.
* ``blend`` — the mean of ``default``'s and ``irt``'s ranks over the left-out prompts.
* ``pooled`` / ``pooled-centred`` — ``default`` / ``centred`` trained on the other benchmarks of
  *both* files pooled (each file's pair mapped to efficient/capable); a benchmark name left out
  leaves it out of both files (MMLU and GSM8K are in both).

Usage::

    python benchmarks/lobo.py texts --out .features/lobo/texts.jsonl.gz   # for lobo_features.py
    python benchmarks/lobo.py score --features .features/lobo --recipes default,centred,irt,pooled
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SWITCHYARD_DATA_DIR", str(REPO.parent / "shared/data")))
FILES = {
    "routerdc": (
        "routerdc-7models/routerdc_7models.jsonl",
        "mistralai/Mistral-7B-v0.1",
        "cognitivecomputations/dolphin-2.9-llama3-8b",
    ),
    "routellm": ("routellm-evals/routellm_evals.jsonl", "mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"),
}
ROUTERDC_MODELS = (
    "mistralai/Mistral-7B-v0.1",
    "meta-math/MetaMath-Mistral-7B",
    "itpossible/Chinese-Mistral-7B-v0.1",
    "HuggingFaceH4/zephyr-7b-beta",
    "cognitivecomputations/dolphin-2.6-mistral-7b",
    "meta-llama/Meta-Llama-3-8B",
    "cognitivecomputations/dolphin-2.9-llama3-8b",
)


@dataclass
class Data:
    """All rows of both files, aligned with the feature rows."""

    ids: list[str]
    texts: list[str]
    file: np.ndarray  # "routerdc" | "routellm"
    bench: np.ndarray
    keep: np.ndarray  # usable (not a RouteLLM-contaminated prompt)
    eff: np.ndarray  # efficient tier's outcome
    cap: np.ndarray  # capable tier's outcome
    binary: np.ndarray  # outcomes are 0/1 (trainable by the joint head)
    models: np.ndarray  # [n, M] every model's outcome (NaN where the file lacks the model)
    model_names: list[str]


def load(data_dir: Path = DATA) -> Data:
    """Reads both files through ``switchyard.probe.data.read_rows`` (the router's text view)."""
    from switchyard.probe.data import read_rows

    names = [*ROUTERDC_MODELS, FILES["routellm"][1], FILES["routellm"][2]]
    ids: list[str] = []
    texts: list[str] = []
    file, bench, keep, binary = [], [], [], []
    eff, cap, models = [], [], []
    for fname, (rel, weak, strong) in FILES.items():
        mapping = {m: m for m in (ROUTERDC_MODELS if fname == "routerdc" else (weak, strong))}
        rows, _ = read_rows(data_dir / rel, mapping)
        n = len(rows)
        ids += rows.ids
        texts += rows.texts
        file += [fname] * n
        bench += [str(f.get("benchmark")) for f in rows.fields]
        keep += [not f.get("routellm_contaminated") for f in rows.fields]
        binary += [f.get("benchmark") != "mt_bench" for f in rows.fields]
        eff.append(rows.quality[weak])
        cap.append(rows.quality[strong])
        block = np.full((n, len(names)), np.nan)
        for j, m in enumerate(names):
            if m in rows.quality:
                block[:, j] = rows.quality[m]
        models.append(block)
    return Data(
        ids,
        texts,
        np.array(file),
        np.array(bench),
        np.array(keep),
        np.concatenate(eff),
        np.concatenate(cap),
        np.array(binary),
        np.concatenate(models),
        names,
    )


def load_features(folder: Path, ids: list[str]) -> np.ndarray:
    """The PCA parts of ``lobo_features.py``, checked against the dataset's ids."""
    meta = json.loads((folder / "lobo-meta.json").read_text())
    if meta["ids"] != ids:
        raise SystemExit(f"{folder}: feature ids do not match the datasets (re-run lobo.py texts and extraction)")
    return np.concatenate([np.load(folder / f) for f in meta["files"]]).astype(np.float64)


# -- recipes ------------------------------------------------------------------------------------


def centred(z: np.ndarray, bench: np.ndarray, file: np.ndarray) -> np.ndarray:
    """Each (file, benchmark)'s mean feature vector subtracted from its rows."""
    out = z.copy()
    for key in set(zip(file.tolist(), bench.tolist(), strict=True)):
        m = (file == key[0]) & (bench == key[1])
        out[m] -= z[m].mean(0)
    return out


def _no_scaler_pca(x: Any, dim: int, seed: int) -> Any:
    """``fit_whitened_pca`` without the per-column scaling: the columns here are already PCA
    components of standardised features, and rescaling each to unit variance would flatten the
    spectrum the fold's PCA has to find. Same centring → PCA → whitening otherwise."""
    from switchyard.routers.learned.checkpoint import Transform

    proj, mu = _no_scaler_transform(np.asarray(x, dtype=np.float64), dim)
    d = len(mu)
    return Transform(mu.astype(np.float32), np.ones(d, np.float32), np.zeros(d, np.float32), proj.T.astype(np.float32))


def _no_scaler_transform(x: np.ndarray, dim: int) -> np.ndarray:
    """Centre → PCA ``dim`` → whiten, fitted on ``x``; returns the projection matrix and mean."""
    mu = x.mean(0)
    xc = x - mu
    cov = xc.T @ xc / max(1, len(x) - 1)
    vals, vecs = np.linalg.eigh(cov)
    order = np.argsort(vals)[::-1][:dim]
    return np.asarray(vecs[:, order] / np.sqrt(np.maximum(vals[order], 1e-12))[None, :]), mu


def head_default(z_tr: np.ndarray, eff: np.ndarray, cap: np.ndarray, z_te: np.ndarray) -> np.ndarray:
    """The shipped head, trained by the project's own ``train_linear``."""
    import switchyard.probe.sk_train as sk
    from switchyard.protocol.features import FeatureRecipe

    y = np.stack([(eff >= 0.5).astype(np.float64), (cap >= 0.5).astype(np.float64)], axis=1)
    recipe = FeatureRecipe(source="lobo", model="pca768", layers=(0,), pooling=("mean",), hidden_size=z_tr.shape[1])
    original = sk.fit_whitened_pca
    sk.fit_whitened_pca = _no_scaler_pca  # type: ignore[assignment]
    try:
        cp = sk.train_linear(z_tr.astype(np.float32), y, ["efficient", "capable"], recipe).checkpoint
    finally:
        sk.fit_whitened_pca = original  # type: ignore[assignment]
    probs = cp.predict(z_te.astype(np.float32))
    return np.asarray(0.5 * (1.0 + probs[:, 1] - probs[:, 0]))


def head_irt(z_tr: np.ndarray, outcomes: np.ndarray, z_te: np.ndarray, c: float = 0.1) -> np.ndarray:
    """Difficulty ``d(x)`` of a 1-parameter IRT model fitted on every model's outcomes."""
    from sklearn.linear_model import LogisticRegression

    proj, mu = _no_scaler_transform(z_tr, 32)
    p_tr, p_te = (z_tr - mu) @ proj, (z_te - mu) @ proj
    cols = [j for j in range(outcomes.shape[1]) if not np.isnan(outcomes[:, j]).all()]
    xs, ys, ws = [], [], []
    for k, j in enumerate(cols):
        known = ~np.isnan(outcomes[:, j])
        s = outcomes[known, j]
        onehot = np.zeros((known.sum(), len(cols)))
        onehot[:, k] = 1.0
        block = np.hstack([-p_tr[known], onehot])
        # A fractional score s counts as s of a success and 1 - s of a failure.
        xs += [block, block]
        ys += [np.ones(len(s)), np.zeros(len(s))]
        ws += [s, 1.0 - s]
    model = LogisticRegression(C=c, max_iter=2000, fit_intercept=False)
    model.fit(np.vstack(xs), np.concatenate(ys), sample_weight=np.concatenate(ws))
    w = model.coef_[0][: p_tr.shape[1]]
    return np.asarray(p_te @ w)  # difficulty: larger = harder


# -- folds --------------------------------------------------------------------------------------

RECIPES = ("default", "centred", "irt", "irt-centred", "pooled", "pooled-centred", "blend")


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks scaled to [0, 1] (ties broken by order: scores here are continuous)."""
    return np.asarray(np.argsort(np.argsort(x)) / max(1, len(x) - 1))


SCORES: dict[str, dict[str, np.ndarray]] = {}
"""Per recipe, per left-out benchmark: the scores of its prompts (for ``--bootstrap``)."""


def run_recipe(name: str, d: Data, z: np.ndarray, zc: np.ndarray) -> dict[str, float]:
    """APGR per left-out (file, benchmark); the scores land in :data:`SCORES`."""
    from switchyard.eval.metrics import evaluate_scores

    feats = zc if name.endswith("centred") else z
    pooled = name.startswith("pooled")
    out: dict[str, float] = {}
    for fname in FILES:
        for b in sorted(set(d.bench[(d.file == fname) & d.keep].tolist())):
            test = (d.file == fname) & (d.bench == b) & d.keep
            same = np.ones(len(d.ids), bool) if pooled else d.file == fname
            train = same & (d.bench != b) & d.keep & d.binary
            if name == "blend":
                # The mean of the two heads' ranks over the left-out prompts (ranks, as live
                # threshold control sees them: only the order within the stream matters).
                gain = head_default(feats[train], d.eff[train], d.cap[train], feats[test])
                score = 0.5 * (ranks(gain) + ranks(head_irt(feats[train], d.models[train], feats[test])))
            elif name.startswith("irt"):
                score = head_irt(feats[train], d.models[train], feats[test])
            else:
                score = head_default(feats[train], d.eff[train], d.cap[train], feats[test])
            r = evaluate_scores([float(s) for s in score], d.cap[test].tolist(), d.eff[test].tolist())
            out[f"{fname}/{b}"] = float(r.apgr) if r.apgr is not None else float("nan")
            SCORES.setdefault(name, {})[f"{fname}/{b}"] = np.asarray(score, dtype=np.float64)
            size = f"n={int(test.sum()):6} train={int(train.sum()):6}"
            print(f"  {name:15} {fname}/{b:16} {size} APGR {out[f'{fname}/{b}']:.3f}", file=sys.stderr, flush=True)
    return out


def paired_bootstrap(d: Data, names: list[str], keys: list[str], rounds: int, seed: int = 0) -> str:
    """SD of (recipe's mean APGR - the first recipe's) over resamples of each left-out benchmark's
    prompts, the same resample for every recipe (paired), benchmarks resampled independently."""
    from switchyard.eval.metrics import evaluate_scores

    rng = np.random.default_rng(seed)
    diffs = {n: [] for n in names[1:]}
    for _ in range(rounds):
        means = dict.fromkeys(names, 0.0)
        for k in keys:
            fname, b = k.split("/", 1)
            test = (d.file == fname) & (d.bench == b) & d.keep
            cap, eff = d.cap[test], d.eff[test]
            pick = rng.integers(0, len(cap), len(cap))
            for n in names:
                r = evaluate_scores(SCORES[n][k][pick].tolist(), cap[pick].tolist(), eff[pick].tolist())
                means[n] += float(r.apgr or 0.0) / len(keys)
        for n in names[1:]:
            diffs[n].append(means[n] - means[names[0]])
    return "\n".join(
        f"{n} - {names[0]}: mean of all {len(keys)} {np.mean(diffs[n]):+.3f}, bootstrap SD {np.std(diffs[n]):.3f} "
        f"({rounds} paired resamples)"
        for n in names[1:]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("texts", help="write {id, text} of every row for lobo_features.py")
    t.add_argument("--out", required=True)
    s = sub.add_parser("score", help="leave-one-benchmark-out APGR per recipe")
    s.add_argument("--features", default=str(REPO / ".features/lobo"))
    s.add_argument("--recipes", default=",".join(RECIPES))
    s.add_argument("--json")
    s.add_argument("--bootstrap", type=int, default=0, help="resamples for the SD of each recipe's mean - the first's")
    args = p.parse_args(argv)
    d = load()
    if args.cmd == "texts":
        with gzip.open(args.out, "wt") as fh:
            for i, text in zip(d.ids, d.texts, strict=True):
                fh.write(json.dumps({"id": i, "text": text}) + "\n")
        print(f"wrote {len(d.ids)} texts to {args.out}")
        return 0
    z = load_features(Path(args.features), d.ids)
    zc = centred(z, d.bench, d.file)
    results: dict[str, dict[str, float]] = {}
    for name in args.recipes.split(","):
        if name not in RECIPES:
            raise SystemExit(f"--recipes: unknown recipe {name!r} (one of {', '.join(RECIPES)})")
        t0 = time.perf_counter()
        results[name] = run_recipe(name, d, z, zc)
        print(f"{name}: {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    keys = list(next(iter(results.values())))
    names = list(results)
    print("| left out | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for k in keys:
        print(f"| {k} | " + " | ".join(f"{results[n][k]:.3f}" for n in names) + " |")
    for label, sel in (
        ("mean, routerdc (7)", [k for k in keys if k.startswith("routerdc/")]),
        ("mean, routellm (3)", [k for k in keys if k.startswith("routellm/")]),
        ("**mean, all 10**", keys),
    ):
        print(f"| {label} | " + " | ".join(f"{np.mean([results[n][k] for k in sel]):.3f}" for n in names) + " |")
    if args.bootstrap and len(names) > 1:
        print(paired_bootstrap(d, names, keys, args.bootstrap))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
