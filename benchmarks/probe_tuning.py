"""Tune the probe honestly: a validation split carved from the training rows (never the test ids).

Reads features from the train-probe cache (run `switchyard train-probe` once first, or any run
that cached the superset recipe below), trains each candidate setting on the training part and
reports validation APGR / score AUC. Prints the table and the command.

    python benchmarks/probe_tuning.py --data ../shared/data/routellm-evals \
        --cache-dir ~/.cache/switchyard/features
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from switchyard.eval.dataset import parse_filters, read_ids
from switchyard.features.cache import find_cache
from switchyard.probe.data import read_rows
from switchyard.probe.report import evaluate_router
from switchyard.probe.train import ProbeParams, build_knn, split_rows, train_probe
from switchyard.protocol.features import FeatureRecipe

MAP = {"efficient": "mistralai/Mixtral-8x7B-Instruct-v0.1", "capable": "gpt-4-1106-preview"}


def recipe(layers: tuple[int, ...], pooling: tuple[str, ...]) -> FeatureRecipe:
    return FeatureRecipe("transformers", "all-MiniLM-L6-v2", layers, pooling, 384, False, 256)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = Path(
        os.environ.get("SWITCHYARD_DATA_DIR", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
    )
    ap.add_argument("--data", default=str(default / "routellm-evals"))
    ap.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "switchyard" / "features"))
    ap.add_argument("--quick", action="store_true", help="fewer settings")
    ap.add_argument(
        "--extract",
        metavar="MODEL",
        help="first extract the superset recipe with this MiniLM (dir or package:MODULE) into --cache-dir",
    )
    ap.add_argument("--device", default="cpu", help="torch device for --extract and training")
    args = ap.parse_args()
    data = Path(args.data)
    if not (data / "routellm_evals.jsonl").exists():
        print(f"dataset not found under {data}; set --data or SWITCHYARD_DATA_DIR")
        return 0
    rows, _ = read_rows(
        data / "routellm_evals.jsonl", MAP, filters=parse_filters(["benchmark=mmlu", "benchmark=gsm8k"])
    )
    held = read_ids(data / "dev_test_ids.txt")
    keep = [
        i
        for i, (rid, f) in enumerate(zip(rows.ids, rows.fields, strict=True))
        if rid not in held and not f.get("routellm_contaminated")
    ]
    rows = rows.take(keep)
    strata = [str(f.get("benchmark")) for f in rows.fields]
    tr, va = split_rows(len(rows), 0.15, 0, strata)
    train, val = rows.take(tr), rows.take(va)
    y = train.labels(list(MAP))
    if args.extract:
        from switchyard.features import build_extractor
        from switchyard.features.cache import FeatureCache

        ex = build_extractor(
            {
                "backend": "transformers",
                "model": args.extract,
                "name": "all-MiniLM-L6-v2",
                "max_tokens": 256,
                "pooling": ["mean", "first", "last"],
                "device": args.device,
                "batch_size": 256,
            }
        )
        t0 = time.perf_counter()
        FeatureCache(args.cache_dir, ex.recipe).fill(train.texts + val.texts, ex.extract_sync, chunk=4096)
        print(f"extracted {len(train) + len(val)} texts in {time.perf_counter() - t0:.1f}s")
    base = ProbeParams(seed=0, device=args.device)
    all_layers = tuple(range(7))
    settings: list[tuple[str, FeatureRecipe, ProbeParams | None]] = [
        ("mean, last layer", recipe((6,), ("mean",)), base),
        ("mean, all layers", recipe(all_layers, ("mean",)), base),
        ("mean+last, all layers", recipe(all_layers, ("mean", "last")), base),
        ("mean+first+last, all", recipe(all_layers, ("mean", "first", "last")), base),
        ("mean+last, upper half", recipe((3, 4, 5, 6), ("mean", "last")), base),
    ]
    if not args.quick:
        r = recipe(all_layers, ("mean", "last"))
        settings += [
            ("mean+last, pca 64", r, dataclasses.replace(base, pca_dim=64)),
            ("mean+last, pca 256", r, dataclasses.replace(base, pca_dim=256)),
            ("mean+last, hidden 128", r, dataclasses.replace(base, hidden=(128,))),
            ("mean+last, lr 3e-4", r, dataclasses.replace(base, lr=3e-4)),
            ("mean+last, dropout .5", r, dataclasses.replace(base, dropout=0.5)),
            ("mean+last, wd 0.1", r, dataclasses.replace(base, weight_decay=0.1)),
            ("mean+last, ensemble 10", r, dataclasses.replace(base, ensemble=10)),
            ("kNN (k 200, uniform)", r, None),
        ]
    print(f"train {len(train)} / validation {len(val)} rows (test ids excluded)")
    print(f"{'setting':28} {'val APGR':>9} {'val AUC(score)':>15} {'seconds':>8}")
    for name, rec, params in settings:
        cache, cols = find_cache(args.cache_dir, rec)
        if cache.missing(train.texts + val.texts):
            print(f"{name:28} (features not cached for this recipe)")
            continue
        xt, xv = cache.get(train.texts, cols), cache.get(val.texts, cols)
        t0 = time.perf_counter()
        if params is None:
            cp = build_knn(xt, y, list(MAP), rec, pca_dim=128, k=200, weighting="uniform")
        else:
            cp = train_probe(
                xt, y, list(MAP), rec, params, strata=[str(f.get("benchmark")) for f in train.fields]
            ).checkpoint
        rep = evaluate_router(name, cp, xv, val, list(MAP), "capable", "efficient")
        print(f"{name:28} {rep.apgr:9.3f} {rep.score_auc or 0:15.3f} {time.perf_counter() - t0:8.1f}", flush=True)
    print("\ncommand: python " + " ".join(sys.argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
