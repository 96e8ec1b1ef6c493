"""Extract the default recipe's SmolLM2 features of every prompt of both shared datasets (GPU).

The leave-one-benchmark-out study (``benchmarks/lobo.py``, docs/learned-routers.md) needs the
default recipe's features (``examples/probe/smollm2-features.yaml``: SmolLM2-135M-Instruct,
blocks 4 … 30, mean and last pooled, newest 512 tokens of the chat-templated text; 10,368
columns) of the 31,967 prompts of routerdc-7models and routellm-evals. That is 1.3 GB in
float32, too much to bring back from the lent GPU, so this script keeps a PCA of them: the
columns are standardised over all rows, projected on the top ``--pca`` principal components
(not whitened) and written as ``float16`` in ``--parts`` row chunks, plus ``lobo-meta.json``
(ids, explained variance, timings). ``lobo.py`` then fits the recipe's own standardise → PCA 32
on each fold's training rows inside that subspace.

The texts come from ``lobo.py texts`` (the router's view of each row, read with
``switchyard.probe.data.read_rows``), and the features from the library's own extractor
(``switchyard.features.build_extractor``), so they are what serving computes.

Layer-mix candidates: ``--save-raw FILE`` keeps the full float32 matrix on the machine, and a
second call with ``--from-raw FILE --pca 0 --blocks K --prefix blocks`` writes, instead of the
global PCA, each (layer, pooling) block's own standardised top-``K`` components side by side
(``blocks-z*.npy``, 18 blocks of ``K`` columns, ``LAYERS`` outer and (mean, last) inner), so ``lobo.py``
can score a head on any subset of layers.

Usage (on the GPU machine; see docs/learned-routers.md "Leave one benchmark out")::

    python benchmarks/lobo_features.py --texts texts.jsonl.gz --model-dir DIR --out OUT
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

LAYERS = [4, 8, 12, 15, 16, 20, 24, 28, 30]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--texts", required=True, help="JSONL(.gz) of {id, text}")
    p.add_argument("--model-dir", required=True, help="folder holding SmolLM2-135M-Instruct.Q4_1.gguf")
    p.add_argument("--out", required=True)
    p.add_argument("--pca", type=int, default=768)
    p.add_argument("--parts", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--limit", type=int)
    p.add_argument("--save-raw", help="also save the float32 features here (for a later --from-raw)")
    p.add_argument("--from-raw", help="read the features from a --save-raw file instead of extracting")
    p.add_argument("--blocks", type=int, default=0, help="per-(layer, pooling) block PCA components")
    p.add_argument("--prefix", default="lobo", help="file names: PREFIX-z*.npy, PREFIX-meta.json")
    args = p.parse_args(argv)

    import numpy as np
    import torch

    from switchyard.features import build_extractor

    opener: Any = gzip.open if args.texts.endswith(".gz") else open
    with opener(args.texts, "rt") as fh:
        items = [json.loads(line) for line in fh]
    if args.limit:
        items = items[: args.limit]
    texts = [o["text"] for o in items]
    config = {
        "backend": "transformers",
        "model": args.model_dir,
        "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "name": "SmolLM2-135M-Instruct",
        "layers": LAYERS,
        "pooling": ["mean", "last"],
        "max_tokens": 512,
        "truncation": "tail",
        "batch_size": args.batch_size,
        "dtype": "float32",
        "device": "cuda" if torch.cuda.is_available() else "cpu",
    }
    extractor: Any = build_extractor(config)
    t0 = time.perf_counter()
    # A bare callback, not switchyard.eval.progress: the eval package needs orjson, which the
    # GPU image lacks.
    last, done = [0.0], [0]

    def progress(batch: int) -> None:
        done[0] += batch
        if time.perf_counter() - last[0] > 15.0:
            last[0] = time.perf_counter()
            print(f"features {done[0]}/{len(texts)}", file=sys.stderr, flush=True)

    if args.from_raw:
        x = np.load(args.from_raw, mmap_mode="r")
    else:
        x = extractor.extract_sync(texts, progress=progress)
    extract_s = time.perf_counter() - t0
    print(f"extracted {len(texts)} texts in {extract_s:.1f}s, shape {x.shape}", file=sys.stderr, flush=True)
    if args.save_raw:
        np.save(args.save_raw, np.asarray(x, dtype=np.float32))

    t1 = time.perf_counter()
    dev = "cuda" if torch.cuda.is_available() else "cpu"

    def pca(cols: Any, dim: int) -> tuple[Any, Any]:
        """Standardised ``cols`` projected on their top ``dim`` components (not whitened)."""
        xt = torch.from_numpy(np.asarray(cols, dtype=np.float32)).to(dev)
        std = xt.std(0)
        xt = (xt - xt.mean(0)) / torch.where(std < 1e-6, torch.ones_like(std), std)
        # Covariance in float64 (10,368² is small on the GPU); eigenvectors by decreasing variance.
        cov = (xt.double().T @ xt.double()) / max(1, xt.shape[0] - 1)
        evals, evecs = torch.linalg.eigh(cov)
        order = torch.argsort(evals, descending=True)
        evals, evecs = evals[order], evecs[:, order]
        k = min(dim, evecs.shape[1])
        return (xt.double() @ evecs[:, :k]).float().cpu().numpy(), evals

    k = 0
    explained, curve = None, {}
    if args.pca:
        z, evals = pca(x, args.pca)
        k = z.shape[1]
        explained = (evals[:k].sum() / evals.sum()).item()
        curve = {str(d): (evals[:d].sum() / evals.sum()).item() for d in (32, 64, 128, 256, 512, k)}
    else:
        width = x.shape[1] // (len(LAYERS) * 2)
        parts = [pca(x[:, b * width : (b + 1) * width], args.blocks)[0] for b in range(len(LAYERS) * 2)]
        z = np.concatenate(parts, axis=1)
    pca_s = time.perf_counter() - t1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, len(texts), args.parts + 1).astype(int)
    files = []
    for j in range(args.parts):
        path = out / f"{args.prefix}-z{j}.npy"
        np.save(path, z[bounds[j] : bounds[j + 1]].astype(np.float16))
        files.append(path.name)
    meta = {
        "recipe": extractor.recipe.to_dict(),
        "n": len(texts),
        "dim_in": int(x.shape[1]),
        "pca": k,
        "explained_variance": explained,
        "explained_curve": curve,
        "blocks": [f"{layer}/{pool}" for layer in LAYERS for pool in ("mean", "last")] if not args.pca else None,
        "block_dim": args.blocks if not args.pca else None,
        "extract_s": extract_s,
        "pca_s": pca_s,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "files": files,
        "ids": [o["id"] for o in items],
    }
    (out / f"{args.prefix}-meta.json").write_text(json.dumps(meta))
    print(f"PCA {k} keeps {explained} of the variance ({pca_s:.1f}s); wrote {files}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
