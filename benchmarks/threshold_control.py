"""Live threshold control on real score streams ordered benchmark by benchmark.

A learned router's scores shift abruptly when the kind of prompt changes. This benchmark makes
real score streams — a ridge probe on cheap features, trained on half of the routerdc-7models
prompts (7 benchmarks, one model pair), scoring the other half — orders the scored half benchmark
by benchmark in many orderings, and replays each through
:class:`switchyard.routers.learned.control.ThresholdController` (the code a route with
``threshold: {target_capable_share: 0.3}`` runs) and through a fixed threshold calibrated to
30 % on the training half.

Reported per ordering: the worst |capable share - 30 %| over every window of 500 prompts after
the first 200 (sliding by one), and in budget mode the spend of every simulated hour against the
budget (prompts arrive evenly, ``--per-hour`` an hour; estimated cost per call = prompt
characters / 4 input tokens + 256 output tokens at the example's prices).

Features (``--features``): ``hashed`` (default; a 2,048-bucket hashed bag of words and word
pairs, seconds on a CPU) or ``minilm`` (all-MiniLM-L6-v2 through the library's extractor,
``examples/probe/minilm-features.yaml`` at 128 tokens; minutes on a CPU; cached under
``.features/``).

Run:
    .venv/bin/python benchmarks/threshold_control.py [--data DIR] [--features hashed|minilm]
        [--per-benchmark 600] [--orderings 40] [--per-hour 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import os
import random
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from switchyard.routers.learned.control import Observation, ThresholdControl, ThresholdController

REPO = Path(__file__).resolve().parents[1]
EFFICIENT, CAPABLE = "mistralai/Mistral-7B-v0.1", "meta-llama/Meta-Llama-3-8B"
PRICES = {"efficient": (0.24, 0.24), "capable": (10.0, 30.0)}  # examples/probe/router.yaml, USD per Mtok
OUTPUT_TOKENS = 256
TARGET = 0.3
_WORD = re.compile(r"\w+")


def load(data: Path, per_benchmark: int) -> list[dict[str, Any]]:
    """Up to ``per_benchmark`` rows of each benchmark (a fixed hash order), with both models' scores."""
    by: dict[str, list[dict[str, Any]]] = {}
    with (data / "routerdc-7models" / "routerdc_7models.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            models = row["models"]
            if EFFICIENT in models and CAPABLE in models:
                by.setdefault(row["benchmark"], []).append(row)
    out = []
    for name in sorted(by):
        rows = sorted(by[name], key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
        out += rows[:per_benchmark]
    return out


def hashed(texts: Sequence[str], dim: int = 2048) -> Any:
    """Hashed bag of words and word pairs, L2-normalised."""
    x = np.zeros((len(texts), dim), np.float32)
    for i, text in enumerate(texts):
        words = _WORD.findall(text.lower())
        for token in (*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))):
            h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
            x[i, h % dim] += 1.0 if (h >> 40) & 1 else -1.0
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-6)


def minilm(texts: Sequence[str], ids: Sequence[str]) -> Any:
    """MiniLM features through the library's extractor, cached by the ids' digest."""
    import yaml

    from switchyard.features import build_extractor, parse_features

    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
    cache = REPO / ".features" / f"threshold-control-minilm-{digest}.npy"
    if cache.is_file():
        return np.load(cache)
    cfg = yaml.safe_load((REPO / "examples/probe/minilm-features.yaml").read_text())
    cfg |= {"max_tokens": 128, "batch_size": 64}
    extractor = build_extractor(parse_features(cfg))

    async def run() -> Any:
        parts = []
        for start in range(0, len(texts), 256):
            parts.append(await extractor.extract(list(texts[start : start + 256])))
            print(f"  minilm {start + len(parts[-1])}/{len(texts)}", file=sys.stderr)
        await extractor.aclose()
        return np.concatenate(parts)

    x = np.asarray(asyncio.run(run()), np.float32)
    cache.parent.mkdir(exist_ok=True)
    np.save(cache, x)
    return x


def ridge_scores(x: Any, y: Any, train: Any, alpha: float = 0.01) -> Any:
    """Scores in [0, 1] from a ridge fit of ``capable - efficient`` on the training rows."""
    mu, sd = x[train].mean(0), x[train].std(0) + 1e-6
    z = (x - mu) / sd
    zt = z[train]
    # dual form: rows << features for the hashed features
    k = zt @ zt.T
    a = np.linalg.solve(k + alpha * len(zt) * np.eye(len(zt)), y[train] - y[train].mean())
    pred = z @ (zt.T @ a) + y[train].mean()
    return np.clip(0.5 + 0.5 * pred, 0.0, 1.0)


def worst_window(decided: Sequence[bool], window: int = 500, skip: int = 200) -> float:
    """The largest |share - target| over every window of ``window`` decisions after ``skip``."""
    prefix = np.concatenate([[0], np.cumsum(np.asarray(decided, np.int64))])
    starts = np.arange(skip, len(decided) - window + 1)
    shares = (prefix[starts + window] - prefix[starts]) / window
    return float(np.max(np.abs(shares - TARGET)))


def replay(spec: ThresholdControl, start: float, scores: Any, costs: Any, per_hour: float) -> list[bool]:
    """Decides the stream in order with a controller; prompts arrive evenly."""
    controller = ThresholdController(spec, start)
    decided = []
    for i, score in enumerate(scores):
        capable = bool(score >= controller.threshold())
        controller.observe(Observation(i * 3600.0 / per_hour, float(score), capable, *costs[i]))
        decided.append(capable)
    return decided


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.environ.get("SWITCHYARD_DATA_DIR", str(REPO.parent / "shared/data")))
    p.add_argument("--features", choices=["hashed", "minilm"], default="hashed")
    p.add_argument("--per-benchmark", type=int, default=600)
    p.add_argument("--orderings", type=int, default=40, help="benchmark orderings (random, seeded) besides A-Z")
    p.add_argument("--per-hour", type=float, default=1000.0, help="simulated prompts an hour (budget mode)")
    p.add_argument("--budget-keys", default="{}", help="extra keys of the budget block, as JSON")
    p.add_argument("--share-keys", default="{}", help="extra keys of the share block, as JSON")
    p.add_argument("--json", help="write the per-ordering results here")
    args = p.parse_args(argv)
    rows = load(Path(args.data), args.per_benchmark)
    texts = [r["prompt"] for r in rows]
    t0 = time.perf_counter()
    x = hashed(texts) if args.features == "hashed" else minilm(texts, [r["id"] for r in rows])
    y = np.array([r["models"][CAPABLE]["score"] - r["models"][EFFICIENT]["score"] for r in rows], np.float32)
    train = np.array([int(hashlib.sha256(r["id"].encode()).hexdigest(), 16) % 2 == 0 for r in rows])
    scores = ridge_scores(x, y, train)
    feature_s = time.perf_counter() - t0
    fixed = float(np.quantile(scores[train], 1 - TARGET))  # calibrated on the training mix
    chars = np.array([len(t) for t in texts], np.float64)
    costs = np.stack(
        [(chars / 4 * PRICES[t][0] + OUTPUT_TOKENS * PRICES[t][1]) / 1e6 for t in ("efficient", "capable")], axis=1
    )
    stream_idx = np.flatnonzero(~train)
    benches = sorted({rows[i]["benchmark"] for i in stream_idx})
    by = {b: [i for i in stream_idx if rows[i]["benchmark"] == b] for b in benches}
    rng = random.Random(0)
    orders = [tuple(benches)] + [tuple(rng.sample(benches, len(benches))) for _ in range(args.orderings)]
    share_spec = ThresholdControl(target_capable_share=TARGET, **json.loads(args.share_keys))
    mean_eff, mean_cap = costs[stream_idx].mean(0)
    budget = args.per_hour * (mean_eff + TARGET * (mean_cap - mean_eff))
    budget_spec = ThresholdControl(budget_usd_per_hour=float(budget), **json.loads(args.budget_keys))
    print(
        f"routerdc-7models, {EFFICIENT} vs {CAPABLE}, features {args.features} ({feature_s:.1f} s): "
        f"{int(train.sum())} training rows, stream of {len(stream_idx)} prompts from {len(benches)} benchmarks"
    )
    print("capable share of each benchmark at the fixed threshold " + f"{fixed:.4f}: " + ", ".join(
        f"{b} {np.mean(scores[by[b]] >= fixed):.0%} (n={len(by[b])})" for b in benches
    ))  # fmt: skip
    results = []
    for order in orders:
        idx = [i for b in order for i in by[b]]
        s, c = scores[idx], costs[idx]
        share = replay(share_spec, fixed, s, c, args.per_hour)
        spend = replay(budget_spec, fixed, s, c, args.per_hour)
        spent = np.where(spend, c[:, 1], c[:, 0])
        per_hour = int(args.per_hour)
        hours = [float(spent[h * per_hour : (h + 1) * per_hour].sum() / budget) for h in range(len(idx) // per_hour)]
        results.append(
            {
                "order": list(order),
                "worst_window_controlled": worst_window(share),
                "worst_window_fixed": worst_window(list(s >= fixed)),
                "share_controlled": float(np.mean(share)),
                "spend_per_hour_vs_budget": hours,
            }
        )
    worst = max(r["worst_window_controlled"] for r in results)
    worst_fixed = max(r["worst_window_fixed"] for r in results)
    hour_err = max(abs(h - 1) for r in results for h in r["spend_per_hour_vs_budget"])
    print(f"{'ordering':58} {'ctl worst':>9} {'fixed worst':>11} {'spend/budget per hour':>24}")
    for r in results:
        hours = " ".join(f"{h:.3f}" for h in r["spend_per_hour_vs_budget"])
        print(
            f"{'>'.join(r['order'])[:58]:58} {r['worst_window_controlled']:>9.3f} "
            f"{r['worst_window_fixed']:>11.3f} {hours:>24}"
        )
    print(
        f"over {len(results)} orderings: worst 500-window |share - {TARGET:.0%}| controlled {worst * 100:.1f} points "
        f"(fixed threshold {worst_fixed * 100:.1f}); worst hour spend vs budget {hour_err * 100:+.1f} %"
    )
    print(f"command: .venv/bin/python benchmarks/threshold_control.py {' '.join(argv or sys.argv[1:])}".rstrip())
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
