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

Second round (cheapest first; all score ``(1 + P(only capable) - P(only efficient)) / 2`` of a
joint multinomial logistic regression unless said otherwise):

* ``knn`` — the mean routing gain (capable's outcome minus efficient's) of the 100 nearest
  training rows in the fold's whitened PCA 32 (the ``knn`` route's rule, uniform weights).
* ``textstats`` — no model: 12 text statistics (log length in characters and words, shares of
  digits, upper case, punctuation, non-ASCII, code symbols and newlines, line count, whether it
  lists A./B. options, asks a question, holds LaTeX), standardised, ``C = 1``.
* ``tfidf`` — no model: word 1-2-gram TF-IDF (50,000 terms, sublinear), ``C = 1``.
* ``lm`` — the efficient-side LM's own uncertainty about the prompt (``lobo_lm_signals.py``:
  SmolLM2's next-token NLL mean/SD/90th percentile, share of tokens under 1 %, mean and last
  entropy, log token count), standardised, ``C = 1``.
* ``default+lm`` — the default's whitened PCA 32 and the 7 LM signals side by side, ``C = 1``.
* ``early`` / ``late`` / ``mean-pool`` — layer mixes: the default head on the per-block PCAs of
  ``lobo_features.py --blocks 32`` of blocks 4 to 12 only / 20 to 30 only / mean pooling only.
* ``ensemble`` — the mean rank of ``default``, ``knn``, ``lm`` and ``irt``.
* ``hard`` — the default checkpoint, scored ``1 - P(efficient succeeds)`` (how hard the prompt
  looks to the efficient model, ignoring whether the capable one would do better).

Normalising the score's rank per traffic source is not a recipe here: it is a monotone map
within each left-out benchmark, so that benchmark's APGR is unchanged by construction (what it
changes is the capable share at a fixed threshold, which live threshold control already holds).

Usage::

    python benchmarks/lobo.py texts --out .features/lobo/texts.jsonl.gz   # for lobo_features.py
    python benchmarks/lobo.py score --features .features/lobo --recipes default,centred,irt,pooled
    python benchmarks/lobo.py score --recipes late --save-scores late.npz     # one process per recipe
    python benchmarks/lobo.py bootstrap default.npz late.npz --rounds 200      # paired, vs the first
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


def save_cache(d: Data, path: str) -> None:
    """The outcome arrays and ids of :class:`Data` (no texts) in one small ``.npz``, so the scoring
    can run where the datasets are not (the GPU machine's CPUs); ``score --data-cache`` reads it."""
    # ``data_file``, not ``file``: savez_compressed's own first parameter is named ``file``.
    arrays = {f: getattr(d, f) for f in ("bench", "keep", "eff", "cap", "binary", "models")}
    np.savez_compressed(path, data_file=d.file, ids=np.array(d.ids), model_names=np.array(d.model_names), **arrays)


def load_cache(path: str) -> Data:
    """:class:`Data` from :func:`save_cache` (empty texts: ``tfidf`` and ``textstats`` need the files)."""
    with np.load(path) as fh:
        ids = [str(i) for i in fh["ids"]]
        return Data(
            ids,
            [""] * len(ids),
            fh["data_file"],
            fh["bench"],
            fh["keep"],
            fh["eff"],
            fh["cap"],
            fh["binary"],
            fh["models"],
            [str(m) for m in fh["model_names"]],
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


def no_scaler_pca(x: Any, dim: int, seed: int) -> Any:
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
    return gain_score(fit_default(z_tr, eff, cap), z_te)


def gain_score(cp: Any, z: np.ndarray) -> np.ndarray:
    """The route's score ``(1 + P(capable) - P(efficient)) / 2`` of a joint checkpoint."""
    probs = cp.predict(z.astype(np.float32))
    return np.asarray(0.5 * (1.0 + probs[:, 1] - probs[:, 0]))


def fit_default(z_tr: np.ndarray, eff: np.ndarray, cap: np.ndarray) -> Any:
    """The default recipe's checkpoint (``train_linear``, the fold's own whitened PCA 32)."""
    import switchyard.probe.sk_train as sk
    from switchyard.protocol.features import FeatureRecipe

    y = np.stack([(eff >= 0.5).astype(np.float64), (cap >= 0.5).astype(np.float64)], axis=1)
    recipe = FeatureRecipe(source="lobo", model="pca768", layers=(0,), pooling=("mean",), hidden_size=z_tr.shape[1])
    original = sk.fit_whitened_pca
    sk.fit_whitened_pca = no_scaler_pca  # type: ignore[assignment]
    try:
        return sk.train_linear(z_tr.astype(np.float32), y, ["efficient", "capable"], recipe).checkpoint
    finally:
        sk.fit_whitened_pca = original  # type: ignore[assignment]


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


def joint_classes(eff: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """0 neither, 1 only efficient, 2 only capable, 3 both (outcomes cut at 0.5)."""
    return (eff >= 0.5).astype(int) + 2 * (cap >= 0.5).astype(int)


def head_joint(
    x_tr: Any, eff: np.ndarray, cap: np.ndarray, x_te: Any, c: float = 1.0, scale: bool = True
) -> np.ndarray:
    """A plain joint multinomial logistic regression (fixed ``C``); the routing-gain score."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    if scale:
        sc = StandardScaler().fit(x_tr)
        x_tr, x_te = sc.transform(x_tr), sc.transform(x_te)
    model = LogisticRegression(C=c, max_iter=3000).fit(x_tr, joint_classes(eff, cap))
    probs = model.predict_proba(x_te)
    col = {k: j for j, k in enumerate(model.classes_)}
    only_cap = probs[:, col[2]] if 2 in col else 0.0
    only_eff = probs[:, col[1]] if 1 in col else 0.0
    return np.asarray(0.5 * (1.0 + only_cap - only_eff))


def head_knn(z_tr: np.ndarray, eff: np.ndarray, cap: np.ndarray, z_te: np.ndarray, k: int = 100) -> np.ndarray:
    """Mean routing gain of the ``k`` nearest training rows in the fold's whitened PCA 32."""
    from sklearn.neighbors import NearestNeighbors

    proj, mu = _no_scaler_transform(z_tr, 32)
    nn = NearestNeighbors(n_neighbors=min(k, len(z_tr))).fit((z_tr - mu) @ proj)
    _, idx = nn.kneighbors((z_te - mu) @ proj)
    gain = (cap >= 0.5).astype(float) - (eff >= 0.5).astype(float)
    return np.asarray(gain[idx].mean(1))


def text_stats(texts: list[str]) -> np.ndarray:
    """Twelve format statistics per text (see the module docstring's ``textstats``)."""
    import re

    rows = []
    for t in texts:
        n = max(1, len(t))
        rows.append(
            [
                np.log1p(len(t)),
                np.log1p(len(t.split())),
                sum(ch.isdigit() for ch in t) / n,
                sum(ch.isupper() for ch in t) / n,
                sum(ch in ".,;:!?'\"()" for ch in t) / n,
                sum(ord(ch) > 127 for ch in t) / n,
                sum(ch in "{}[]<>=_#/\\|`" for ch in t) / n,
                t.count("\n") / n,
                np.log1p(t.count("\n")),
                float(bool(re.search(r"(^|\n)\s*\(?[AB][.):]", t))),
                float("?" in t),
                float("$" in t or "\\frac" in t),
            ]
        )
    return np.asarray(rows, dtype=np.float64)


def head_tfidf(t_tr: list[str], eff: np.ndarray, cap: np.ndarray, t_te: list[str]) -> np.ndarray:
    """Word 1-2-gram TF-IDF, joint head."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(ngram_range=(1, 2), max_features=50_000, sublinear_tf=True, min_df=2)
    return head_joint(vec.fit_transform(t_tr), eff, cap, vec.transform(t_te), scale=False)


def whitened(z_tr: np.ndarray, z_te: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fold's whitened PCA 32 of training and left-out rows."""
    proj, mu = _no_scaler_transform(z_tr, 32)
    return (z_tr - mu) @ proj, (z_te - mu) @ proj


# -- folds --------------------------------------------------------------------------------------

RECIPES = (
    "default",
    "centred",
    "irt",
    "irt-centred",
    "pooled",
    "pooled-centred",
    "blend",
    "knn",
    "textstats",
    "tfidf",
    "lm",
    "default+lm",
    "early",
    "late",
    "mean-pool",
    "ensemble",
    "hard",
)
EXTRA: dict[str, Any] = {}
"""Lazily loaded inputs of the second-round recipes: ``lm`` signals, ``blocks`` PCAs, ``stats``."""
LAYER_MIX = {"early": ("4/", "8/", "12/"), "late": ("20/", "24/", "28/", "30/"), "mean-pool": ("/mean",)}


def block_columns(meta: dict[str, Any], name: str) -> np.ndarray:
    """Column indices of the per-block PCA file that a layer mix keeps."""
    width = meta["block_dim"]
    keep = [j for j, b in enumerate(meta["blocks"]) if any(part in b for part in LAYER_MIX[name])]
    return np.concatenate([np.arange(j * width, (j + 1) * width) for j in keep])


def score_fold(name: str, d: Data, feats: np.ndarray, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """One recipe's scores of the left-out rows ``test`` when trained on ``train``."""
    eff, cap = d.eff[train], d.cap[train]
    if name == "blend":
        # The mean of the two heads' ranks over the left-out prompts (ranks, as live threshold
        # control sees them: only the order within the stream matters).
        gain = head_default(feats[train], eff, cap, feats[test])
        return 0.5 * (ranks(gain) + ranks(head_irt(feats[train], d.models[train], feats[test])))
    if name.startswith("irt"):
        return head_irt(feats[train], d.models[train], feats[test])
    if name == "knn":
        return head_knn(feats[train], eff, cap, feats[test])
    if name == "textstats":
        return head_joint(EXTRA["stats"][train], eff, cap, EXTRA["stats"][test])
    if name == "tfidf":
        t_tr = [d.texts[i] for i in np.flatnonzero(train)]
        return head_tfidf(t_tr, eff, cap, [d.texts[i] for i in np.flatnonzero(test)])
    if name == "lm":
        return head_joint(EXTRA["lm"][train], eff, cap, EXTRA["lm"][test])
    if name == "default+lm":
        w_tr, w_te = whitened(feats[train], feats[test])
        x_tr, x_te = np.hstack([w_tr, EXTRA["lm"][train]]), np.hstack([w_te, EXTRA["lm"][test]])
        return head_joint(x_tr, eff, cap, x_te)
    if name in LAYER_MIX:
        blocks = EXTRA["blocks"][:, block_columns(EXTRA["blocks_meta"], name)]
        return head_default(blocks[train], eff, cap, blocks[test])
    if name == "hard":
        probs = fit_default(feats[train], eff, cap).predict(feats[test].astype(np.float32))
        return np.asarray(1.0 - probs[:, 0])
    if name == "ensemble":
        parts = [score_fold(n, d, feats, train, test) for n in ("default", "knn", "lm", "irt")]
        return np.mean([ranks(p) for p in parts], axis=0)
    return head_default(feats[train], eff, cap, feats[test])


def load_extra(names: list[str], d: Data, folder: Path) -> None:
    """Reads what the second-round recipes need into :data:`EXTRA`."""
    if any(n in ("lm", "default+lm", "ensemble") for n in names):
        meta = json.loads((folder / "lm-signals-meta.json").read_text())
        if meta["ids"] != d.ids:
            raise SystemExit(f"{folder}: LM-signal ids do not match the datasets")
        EXTRA["lm"] = np.load(folder / "lm-signals.npy").astype(np.float64)
    if any(n in LAYER_MIX for n in names):
        meta = json.loads((folder / "blocks-meta.json").read_text())
        if meta["ids"] != d.ids:
            raise SystemExit(f"{folder}: block-PCA ids do not match the datasets")
        EXTRA["blocks"] = np.concatenate([np.load(folder / f) for f in meta["files"]]).astype(np.float64)
        EXTRA["blocks_meta"] = meta
    if "textstats" in names:
        EXTRA["stats"] = text_stats(d.texts)


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
            score = score_fold(name, d, feats, train, test)
            r = evaluate_scores([float(s) for s in score], d.cap[test].tolist(), d.eff[test].tolist())
            out[f"{fname}/{b}"] = float(r.apgr) if r.apgr is not None else float("nan")
            SCORES.setdefault(name, {})[f"{fname}/{b}"] = np.asarray(score, dtype=np.float64)
            size = f"n={int(test.sum()):6} train={int(train.sum()):6}"
            print(f"  {name:15} {fname}/{b:16} {size} APGR {out[f'{fname}/{b}']:.3f}", file=sys.stderr, flush=True)
    return out


def fast_apgr(score: np.ndarray, cap: np.ndarray, eff: np.ndarray) -> float:
    """APGR of "capable iff score >= t" over every distinct threshold, in numpy.

    The same curve and trapezoid as ``switchyard.eval.curves`` (tied scores move together, as a
    threshold moves them), vectorised so that hundreds of bootstrap resamples take seconds;
    :func:`paired_bootstrap` checks it against ``evaluate_scores`` on the unresampled scores.
    """
    n = len(score)
    qs, qw = cap.mean(), eff.mean()
    if qs - qw <= 1e-12:
        return float("nan")
    order = np.argsort(-score, kind="stable")
    s = score[order]
    gain = np.cumsum(cap[order] - eff[order])
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True])  # last index of each distinct score
    share = np.r_[0.0, (ends + 1) / n]
    quality = np.r_[qw, qw + gain[ends] / n]
    area = np.sum(np.diff(share) * ((quality[1:] + quality[:-1]) / 2 - qw)) / (qs - qw)
    return float(area)


def paired_bootstrap(d: Data, names: list[str], keys: list[str], rounds: int, seed: int = 0) -> str:
    """SD of (recipe's mean APGR - the first recipe's) over resamples of each left-out benchmark's
    prompts, the same resample for every recipe (paired), benchmarks resampled independently."""
    from switchyard.eval.metrics import evaluate_scores

    rng = np.random.default_rng(seed)
    diffs = {n: [] for n in names[1:]}
    for k in keys:  # the fast APGR is the library's, on the full sample
        fname, b = k.split("/", 1)
        test = (d.file == fname) & (d.bench == b) & d.keep
        for n in names:
            ref = evaluate_scores(SCORES[n][k].tolist(), d.cap[test].tolist(), d.eff[test].tolist()).apgr
            if abs(fast_apgr(SCORES[n][k], d.cap[test], d.eff[test]) - float(ref or 0.0)) > 1e-9:
                raise SystemExit(f"fast APGR differs from evaluate_scores on {n} {k}")
    for _ in range(rounds):
        means = dict.fromkeys(names, 0.0)
        for k in keys:
            fname, b = k.split("/", 1)
            test = (d.file == fname) & (d.bench == b) & d.keep
            cap, eff = d.cap[test], d.eff[test]
            pick = rng.integers(0, len(cap), len(cap))
            for n in names:
                means[n] += fast_apgr(SCORES[n][k][pick], cap[pick], eff[pick]) / len(keys)
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
    c = sub.add_parser("cache", help="write the outcome arrays (no texts) for score --data-cache")
    c.add_argument("--out", required=True)
    s = sub.add_parser("score", help="leave-one-benchmark-out APGR per recipe")
    s.add_argument("--features", default=str(REPO / ".features/lobo"))
    s.add_argument("--recipes", default=",".join(RECIPES))
    s.add_argument("--json")
    s.add_argument("--bootstrap", type=int, default=0, help="resamples for the SD of each recipe's mean - the first's")
    s.add_argument("--save-scores", help="write every recipe's left-out scores here (.npz, for `bootstrap`)")
    bs = sub.add_parser("bootstrap", help="paired bootstrap over scores saved by `score --save-scores`")
    bs.add_argument("scores", nargs="+", help=".npz files; the first recipe of the first file is the reference")
    bs.add_argument("--rounds", type=int, default=200)
    bs.add_argument("--data-cache", help="as for score")
    s.add_argument("--data-cache", help="read the rows from `cache`'s .npz instead of the datasets")
    args = p.parse_args(argv)
    d = load_cache(args.data_cache) if getattr(args, "data_cache", None) else load()
    if args.cmd == "cache":
        save_cache(d, args.out)
        return 0
    if args.cmd == "bootstrap":
        for path in args.scores:
            with np.load(path) as fh:
                for key in fh.files:
                    name, bench = key.split("|", 1)
                    SCORES.setdefault(name, {})[bench] = fh[key]
        names = list(SCORES)
        print(paired_bootstrap(d, names, list(SCORES[names[0]]), args.rounds))
        return 0
    if args.cmd == "texts":
        with gzip.open(args.out, "wt") as fh:
            for i, text in zip(d.ids, d.texts, strict=True):
                fh.write(json.dumps({"id": i, "text": text}) + "\n")
        print(f"wrote {len(d.ids)} texts to {args.out}")
        return 0
    z = load_features(Path(args.features), d.ids)
    zc = centred(z, d.bench, d.file)
    results: dict[str, dict[str, float]] = {}
    wanted = args.recipes.split(",")
    for name in wanted:
        if name not in RECIPES:
            raise SystemExit(f"--recipes: unknown recipe {name!r} (one of {', '.join(RECIPES)})")
    load_extra(wanted, d, Path(args.features))
    for name in wanted:
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
    if args.save_scores:
        np.savez(args.save_scores, **{f"{n}|{k}": v for n, per in SCORES.items() for k, v in per.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
