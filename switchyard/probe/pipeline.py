"""``switchyard train-probe`` end to end: rows → features (cached) → train → report → checkpoint.

Layer: ``probe``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.dataset import EvalItem, Filter
from switchyard.eval.good_enough import GoodEnough, GoodEnoughError
from switchyard.eval.progress import Progress
from switchyard.features import build_extractor
from switchyard.features.cache import FeatureCache, find_cache
from switchyard.probe.calibrated import calibrate
from switchyard.probe.data import Rows, read_rows
from switchyard.probe.operating import OperatingPoint, Scored, curve_lines, operating_points, render_points
from switchyard.probe.report import SliceReport, baselines, evaluate_router, render, score_of
from switchyard.probe.train import ProbeParams, build_knn, split_rows, train_probe
from switchyard.protocol.features import FeatureExtractor, FeatureRecipe
from switchyard.routers.learned import checkpoint as ckpt
from switchyard.routers.learned import novelty
from switchyard.routers.learned.calibration import CALIBRATION_FILE, Calibration, weights_digest
from switchyard.routers.learned.calibration import save as save_calibration
from switchyard.routers.learned.views import TextView

KNN_GRID = (5, 10, 20, 50, 100, 200, 400, 800)


class TrainError(ValueError):
    """Training cannot proceed (the message says why and what to change)."""


@dataclass(slots=True)
class Plan:
    """What ``train-probe`` was asked to do.

    Attributes:
        datasets: JSONL datasets (``switchyard eval`` format), read one after the other.
        mapping: Target (head) name → dataset model ids (one per dataset whose models are
            named differently; an item is read with the first it holds), in head order.
        features: A validated ``features`` block.
        out: Checkpoint directory.
        router: ``probe``, ``linear`` (scikit-learn), ``mf`` (RouteLLM-style matrix
            factorisation on pairwise outcomes) or ``knn``.
        link: ``linear`` only: ``joint`` (two heads: one model of the joint outcome) or
            ``independent`` (one regression per head).
        test_ids: Ids held out for the report (never trained or tuned on).
        where: Keep only these items for training.
        exclude: Drop items matching any of these from training.
        report_where: Extra report slices ``(name, filters)`` over items not trained on.
        params: Probe hyper-parameters (``seed`` included).
        knn_k: kNN neighbours (``None``: tuned on the validation split).
        knn_weighting: ``distance`` / ``uniform`` (``None``: tuned).
        compare_knn: Also fit a tuned kNN and report it next to the probe.
        capable: The capable target (default: the one with the higher training quality).
        cache_dir: Feature cache root.
        view: Which text of each row is read (the route's ``input``).
        turns: Messages kept by the ``conversation`` view.
        good_enough: Bars per outcome type that replace or extend the defaults
            (:mod:`switchyard.eval.good_enough`): graded outcomes become good-enough labels.
        source_weights: Row weight per source (the row's ``benchmark``; default 1).
        calibration: ``auto`` (``isotonic`` for ``linear`` and ``knn``, none for ``probe``),
            ``isotonic``, ``platt`` or ``none``: the calibration artifact's method.
        calibration_folds: Folds of the out-of-fold predictions it is fitted on.
    """

    datasets: list[Path]
    mapping: dict[str, tuple[str, ...]]
    features: Any
    out: Path
    router: str = "probe"
    link: str = "joint"
    test_ids: frozenset[str] | None = None
    where: list[Filter] = field(default_factory=list)
    exclude: list[Filter] = field(default_factory=list)
    report_where: list[tuple[str, list[Filter]]] = field(default_factory=list)
    params: ProbeParams = field(default_factory=ProbeParams)
    knn_k: int | None = None
    knn_weighting: str | None = None
    compare_knn: bool = False
    capable: str | None = None
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "switchyard" / "features")
    view: TextView = "conversation"
    turns: int = 6
    good_enough: dict[str, float] = field(default_factory=dict)
    source_weights: dict[str, float] = field(default_factory=dict)
    calibration: str = "auto"
    calibration_folds: int = 5


@dataclass(slots=True)
class Outcome:
    """What a run produced."""

    checkpoint_dir: Path
    report: dict[str, list[SliceReport]]
    text: str
    timings: dict[str, float]
    meta: dict[str, Any]


def _drop(rows: Rows, ids: set[str] | frozenset[str]) -> Rows:
    return rows.take([i for i, x in enumerate(rows.ids) if x not in ids])


@dataclass(slots=True)
class _Selected:
    """Every dataset read once: all rows, and which of them each selection of the plan keeps."""

    rows: Rows
    where: list[int] = field(default_factory=list)
    excluded: set[str] = field(default_factory=set)
    test: list[int] = field(default_factory=list)
    report: dict[str, list[int]] = field(default_factory=dict)
    skipped: int = 0  # items ``where`` keeps that have no user text


def _read(plan: Plan) -> _Selected:
    """The rows of every dataset, concatenated, read in one pass per file; the selections
    (``where``, ``exclude``, ``test_ids``, ``report_where``) are applied to each item as it is read."""
    report: dict[str, list[int]] = {name: [] for name, _ in plan.report_where}
    picked = _Selected(Rows(), report=report)
    count = [0]  # rows so far, over every dataset

    def seen(item: EvalItem, is_row: bool) -> None:
        kept = all(f.accepts(item) for f in plan.where)
        if not is_row:
            picked.skipped += kept
            return
        n = count[0]
        count[0] += 1
        if kept:
            picked.where.append(n)
        if any(f.accepts(item) for f in plan.exclude):
            picked.excluded.add(item.id)
        if plan.test_ids is not None and item.id in plan.test_ids:
            picked.test.append(n)
        for name, filters in plan.report_where:
            if all(f.accepts(item) for f in filters):
                report[name].append(n)

    parts = [read_rows(p, plan.mapping, view=plan.view, turns=plan.turns, seen=seen)[0] for p in plan.datasets]
    picked.rows = parts[0]
    for part in parts[1:]:
        picked.rows = picked.rows.concat(part)
    return picked


def load_splits(plan: Plan, log: Callable[[str], None]) -> tuple[Rows, dict[str, Rows]]:
    """Training rows and the report slices (``test`` first when ``test_ids`` is given)."""
    picked = _read(plan)
    if picked.skipped:
        log(f"skipped {picked.skipped} items without a user message")
    held = set(plan.test_ids or ())
    train = _drop(picked.rows.take(picked.where), held | picked.excluded)
    if len(train) < 10:
        raise TrainError(f"only {len(train)} training items after filters and held-out ids; need at least 10")
    for t in plan.mapping:
        if bool((train.quality[t] != train.quality[t]).all()):
            raise TrainError(f"target {t!r}: no training item has an outcome for model {plan.mapping[t]!r}")
    slices: dict[str, Rows] = {}
    trained = set(train.ids)
    if plan.test_ids is not None:
        slices["test"] = picked.rows.take(picked.test)
    for name, _ in plan.report_where:
        slices[name] = _drop(picked.rows.take(picked.report[name]), trained)
    return train, slices


def _sync_extract(extractor: FeatureExtractor) -> Callable[[list[str]], Any]:
    direct = getattr(extractor, "extract_sync", None)
    if callable(direct):
        return lambda texts: direct(texts)

    def run(texts: list[str]) -> Any:
        return asyncio.run(_extract_and_close(extractor, texts))

    return run


async def _extract_and_close(extractor: FeatureExtractor, texts: list[str]) -> Any:
    try:
        return await extractor.extract(texts)
    finally:
        await extractor.aclose()


def features_for(
    plan: Plan, texts: Sequence[str], log: Callable[[str], None]
) -> tuple[Any, FeatureRecipe, dict[str, float]]:
    """Features of ``texts``, extracted once and cached on disk.

    Returns:
        ``(matrix, recipe, timings)``; timings holds ``extract_s`` and ``extracted`` (count).
    """
    extractor = build_extractor(plan.features)
    extract = _sync_extract(extractor)
    if extractor.recipe.hidden_size is None:
        extract([texts[0]])  # HTTP backends learn their width from a first answer
    recipe = extractor.recipe
    cache, cols = find_cache(plan.cache_dir, recipe)
    if cols is not None and cache.missing(texts):
        cache, cols = FeatureCache(plan.cache_dir, recipe), None
    todo = len(cache.missing(texts))
    t0 = time.perf_counter()
    if todo:
        log(f"extracting features for {todo} texts ({recipe.source}, {recipe.model}); cache: {cache.dir}")
        with Progress(todo, "features") as bar:
            cache.fill(texts, extract, chunk=512, progress=bar.update)
    else:
        log(f"all {len(texts)} feature vectors found in the cache ({cache.dir})")
    elapsed = time.perf_counter() - t0
    return cache.get(texts, cols), recipe, {"extract_s": elapsed, "extracted": float(todo)}


def tune_knn(
    x: Any,
    y: Any,
    rows: Rows,
    names: list[str],
    recipe: FeatureRecipe,
    capable: str,
    efficient: str,
    plan: Plan,
) -> tuple[int, str, float | None]:
    """``(k, weighting, validation APGR)`` chosen on a validation split of the training rows."""
    strata = [str(f.get("benchmark", "")) for f in rows.fields]
    tr, va = split_rows(len(rows), plan.params.val_fraction, plan.params.seed, strata)
    ks = [plan.knn_k] if plan.knn_k else list(KNN_GRID)
    ws = [plan.knn_weighting] if plan.knn_weighting else ["distance", "uniform"]
    best: tuple[float, int, str] = (-1.0, ks[0], ws[0])
    probe = build_knn(x[tr], y[tr], names, recipe, pca_dim=plan.params.pca_dim, k=ks[0], seed=plan.params.seed)
    val_rows = rows.take(va)
    for w in ws:
        for k in ks:
            probe.k, probe.weighting = k, w
            r = evaluate_router("knn", probe, x[va], val_rows, names, capable, efficient)
            if r.apgr is not None and r.apgr > best[0]:
                best = (r.apgr, k, w)
    return best[1], best[2], (best[0] if best[0] >= 0 else None)


def _operating(
    cp: ckpt.Checkpoint,
    train_probs: Any,
    train: Rows,
    slices: dict[str, tuple[Any, Rows]],
    names: list[str],
    capable: str,
    efficient: str,
) -> tuple[list[OperatingPoint], str]:
    """Thresholds picked on the training rows and the share they give on every slice, plus
    the curve of the first slice; from the checkpoint's predictions (``slices``: name →
    ``(probs, rows)``)."""
    heads = [cp.output_names.index(t) for t in names]

    def scored(probs: Any, rows: Rows) -> Scored:
        score = score_of(probs, heads, names.index(capable), names.index(efficient))
        groups = [str(f.get("benchmark", "-")) for f in rows.fields]
        return Scored(score, groups, rows.quality[capable], rows.quality[efficient])

    held = {k: scored(probs, rows) for k, (probs, rows) in slices.items() if len(rows)}
    points = operating_points(scored(train_probs, train), held)
    lines = ["operating points (thresholds picked on the training rows):", *render_points(points)]
    if held:
        first = next(iter(held))
        lines += ["", f"curve on {first} (capable share -> quality / always-capable, PGR):", *curve_lines(held[first])]
    return points, "\n".join(lines) + "\n"


def run(plan: Plan, log: Callable[[str], None] = print) -> Outcome:
    """Runs the whole pipeline and writes the checkpoint.

    Raises:
        TrainError: Unusable inputs.
        DatasetError: A malformed dataset.
        FeatureError: Feature extraction failed.
    """
    names = list(plan.mapping)
    if len(names) < 2:
        raise TrainError("give at least two --map TARGET=MODEL pairs")
    train, slices = load_splits(plan, log)
    log(f"training items: {len(train)}; report slices: " + ", ".join(f"{k}={len(v)}" for k, v in slices.items()))
    texts = list(dict.fromkeys([*train.texts, *(t for s in slices.values() for t in s.texts)]))
    x_all, recipe, timings = features_for(plan, texts, log)
    pos = {t: i for i, t in enumerate(texts)}
    x = x_all[[pos[t] for t in train.texts]]
    rule = GoodEnough(plan.good_enough)
    try:
        # mf learns from which model did better, so it keeps graded outcomes as they are
        y = train.labels(names) if plan.router == "mf" else train.good(names, rule)
    except GoodEnoughError as exc:
        raise TrainError(str(exc)) from None
    weights = source_weights(train, plan.source_weights)
    if weights is not None and plan.router != "linear":
        raise TrainError("--source-weight works with --router linear only")
    means = {t: float(train.quality[t][~(train.quality[t] != train.quality[t])].mean()) for t in names}
    capable = plan.capable or max(names, key=lambda t: means[t])
    if capable not in names:
        raise TrainError(f"--capable {capable!r} is not one of the --map targets {names}")
    efficient = min((t for t in names if t != capable), key=lambda t: means[t])
    strata = [str(f.get("benchmark", "")) for f in train.fields]
    meta: dict[str, Any] = {
        "dataset": ", ".join(p.name for p in plan.datasets),
        "map": {t: (m[0] if len(m) == 1 else list(m)) for t, m in plan.mapping.items()},
        "good_enough": rule.describe(),
        "source_weights": plan.source_weights,
        "n_train": len(train),
        "train_quality": means,
        "capable": capable,
        "efficient": efficient,
        "seed": plan.params.seed,
        "input": plan.view,
        "turns": plan.turns,
    }
    routers: dict[str, ckpt.Checkpoint] = {}
    t0 = time.perf_counter()
    if plan.router == "linear":
        from switchyard.probe.sk_train import LinearParams, train_linear

        lparams = LinearParams(pca_dim=plan.params.pca_dim, seed=plan.params.seed, link=plan.link)
        linear = train_linear(x, y, names, recipe, lparams, weights=weights)
        meta["linear"] = linear.chosen
        meta["link"] = linear.checkpoint.link
        if linear.note:
            log(f"note: {linear.note}")
            meta["link_note"] = linear.note
        routers["linear"] = linear.checkpoint
    if plan.router == "mf":
        from switchyard.probe.mf_train import MFParams, train_mf

        # the logit reads "the second name does better": put the capable target second
        pair = [efficient, capable]
        order = [names.index(t) for t in pair]
        try:
            mf_cp, facts = train_mf(
                x, y[:, order], pair, recipe, MFParams(pca_dim=plan.params.pca_dim, seed=plan.params.seed)
            )
        except ValueError as exc:
            raise TrainError(str(exc)) from None
        meta["mf"] = facts
        routers["mf"] = mf_cp
    if plan.router == "probe":
        total = plan.params.ensemble * plan.params.epochs
        with Progress(total, "training") as bar:
            result = train_probe(x, y, names, recipe, plan.params, strata=strata, progress=bar.update)
        meta["params"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(plan.params).items()}
        meta["history"] = result.history
        routers["probe"] = result.checkpoint
    timings["train_s"] = time.perf_counter() - t0
    if plan.router == "knn" or plan.compare_knn:
        k, w, val_apgr = tune_knn(x, y, train, names, recipe, capable, efficient, plan)
        log(f"kNN: k={k}, weighting={w} (validation APGR {val_apgr if val_apgr is None else round(val_apgr, 3)})")
        routers["knn"] = build_knn(
            x, y, names, recipe, pca_dim=plan.params.pca_dim, k=k, weighting=w, seed=plan.params.seed
        )
        meta["knn"] = {"k": k, "weighting": w, "val_apgr": val_apgr}
    for cp in routers.values():  # the reference a served router measures novelty against
        cp.novelty = novelty.fit(cp.project(x), seed=plan.params.seed)
    report: dict[str, list[SliceReport]] = {}
    fired: dict[str, float] = {}
    main_router = routers[plan.router]
    held: dict[str, tuple[Any, Rows]] = {}  # the main router's predictions per slice, made once
    for name, rows in slices.items():
        xs = x_all[[pos[t] for t in rows.texts]]
        report[name] = []
        for r, cp in routers.items():
            probs = cp.predict(xs) if len(rows) else None
            if cp is main_router:
                held[name] = (probs, rows)
            report[name].append(evaluate_router(r, cp, xs, rows, names, capable, efficient, probs=probs))
        report[name] += baselines(rows, capable, efficient)
        ref = main_router.novelty
        if ref is not None and len(rows):
            fired[name] = float((ref.distance(main_router.project(xs)) > ref.bound).mean())
    text = render(report, names)
    if main_router.novelty is not None:
        ref = main_router.novelty
        shares = ", ".join(f"{name} {share:.1%}" for name, share in fired.items())
        text += (
            f"\nnovelty: beyond the {ref.percentile:g}th-percentile bound {ref.bound:.4g} "
            f"(mean distance to the {ref.k} nearest training rows): {shares or 'no held-out slices'}\n"
        )
        meta["novelty_fired"] = fired
    points, point_text = _operating(main_router, main_router.predict(x), train, held, names, capable, efficient)
    text += "\n" + point_text
    meta["operating_points"] = [p.to_dict() for p in points]
    meta["report"] = {k: [r.to_dict() for r in v] for k, v in report.items()}
    fit = _Fit(x, y, weights, strata, names, recipe, rule)
    timings["calibration_s"], cals = _calibrate_all(plan, routers, main_router, held, slices, x_all, pos, meta, fit)
    text += "".join(f"\n[{r}] {t}" for r, t in meta.pop("_calibration_text", {}).items())
    meta["timings"] = timings
    _save(main_router, plan.out, meta, cals.get(plan.router))
    if plan.compare_knn and plan.router != "knn":
        _save(routers["knn"], plan.out / "knn", meta, cals.get("knn"))
    return Outcome(plan.out, report, text, timings, meta)


def _calibrate_all(
    plan: Plan,
    routers: dict[str, ckpt.Checkpoint],
    main_router: ckpt.Checkpoint,
    held: dict[str, tuple[Any, Rows]],
    slices: dict[str, Rows],
    x_all: Any,
    pos: dict[str, int],
    meta: dict[str, Any],
    fit: _Fit,
) -> tuple[float, dict[str, Calibration]]:
    """Fits each router's calibration artifact (``plan.calibration``; ``auto`` skips the MLP
    probe); facts into ``meta["calibration"]``, report text into ``meta["_calibration_text"]``."""
    t0 = time.perf_counter()
    cals: dict[str, Calibration] = {}
    for r, train_fn in _trainers(plan, fit.names, fit.recipe, meta, fit.weights).items():
        method = {"auto": None if r == "probe" else "isotonic", "none": None}.get(plan.calibration, plan.calibration)
        if method is None:
            continue
        own = held if routers[r] is main_router else _held(routers[r], slices, x_all, pos)
        cal, cal_text, facts = calibrate(
            train_fn,
            # The fold models start from the full fit's standardise + PCA (unsupervised: it saw
            # no outcomes) and refit only the head: held-out for the labels, at a fraction of
            # the cost of re-extracting principal components from thousands of columns per fold.
            routers[r].project(fit.x),
            fit.y,
            fit.weights,
            fit.strata,
            fit.names,
            method=method,
            folds=plan.calibration_folds,
            seed=plan.params.seed,
            held=own,
            rule=fit.rule,
        )
        cals[r] = cal
        meta.setdefault("calibration", {})[r] = {"method": method, "ece": facts}
        meta.setdefault("_calibration_text", {})[r] = cal_text
    return time.perf_counter() - t0, cals


@dataclass(slots=True)
class _Fit:
    """What the routers were trained on (the calibration's out-of-fold models retrain on it)."""

    x: Any
    y: Any
    weights: Any
    strata: list[str]
    names: list[str]
    recipe: FeatureRecipe
    rule: GoodEnough


def source_weights(rows: Rows, weights: dict[str, float]) -> Any:
    """Per-row weights from per-source weights (the row's ``benchmark``; default 1), or ``None``
    when every row weighs 1 (the unweighted fit)."""
    import numpy as np

    if not weights:
        return None
    return np.array([weights.get(s, 1.0) for s in rows.sources()], dtype=np.float64)


def _held(cp: ckpt.Checkpoint, slices: dict[str, Rows], x_all: Any, pos: dict[str, int]) -> dict[str, tuple[Any, Rows]]:
    return {n: (cp.predict(x_all[[pos[t] for t in r.texts]]) if len(r) else None, r) for n, r in slices.items()}


def _trainers(
    plan: Plan, names: list[str], recipe: FeatureRecipe, meta: dict[str, Any], weights: Any
) -> dict[str, Callable[[Any, Any, Any], Any]]:
    """The recipe of each trained router that has P(success) per target (not ``mf``, whose one
    output is which model does better), for the out-of-fold models of its calibration."""
    out: dict[str, Callable[[Any, Any, Any], Any]] = {}
    seed, dim = plan.params.seed, plan.params.pca_dim
    if plan.router == "linear":
        from switchyard.probe.sk_train import LinearParams, train_linear

        # The out-of-fold models reuse the regularisation the full fit chose (no inner search)
        chosen = tuple(sorted({float(v["C"]) for v in meta.get("linear", {}).values()}))
        lp = LinearParams(pca_dim=dim, seed=seed, link=plan.link, cs=chosen or LinearParams().cs)
        out["linear"] = lambda xa, ya, wa: train_linear(xa, ya, names, recipe, lp, weights=wa).checkpoint
    if plan.router == "probe":
        out["probe"] = lambda xa, ya, wa: train_probe(xa, ya, names, recipe, plan.params).checkpoint
    if "knn" in meta:
        k, w = meta["knn"]["k"], meta["knn"]["weighting"]
        out["knn"] = lambda xa, ya, wa: build_knn(xa, ya, names, recipe, pca_dim=dim, k=k, weighting=w, seed=seed)
    return out


def _save(cp: ckpt.Checkpoint, out: Path, meta: dict[str, Any], cal: Calibration | None) -> None:
    """Writes the checkpoint, then its calibration tied to the written weights (a stale
    ``calibration.json`` from an earlier run is removed: it would not match them)."""
    ckpt.save(cp, out, meta)
    stale = out / CALIBRATION_FILE
    if cal is None:
        stale.unlink(missing_ok=True)
        return
    cal.checkpoint_sha256 = weights_digest(out)
    save_calibration(cal, out)
