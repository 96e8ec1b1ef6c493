"""The efficient-side language model's own uncertainty about each prompt (GPU; for ``lobo.py``).

A candidate for issue 25's off-distribution quality: signals that need no training data of their
own and so might carry across benchmarks where the hidden-state probe does not. SmolLM2-135M-
Instruct (the default recipe's model, with its LM head) reads each prompt exactly as the feature
extractor does (the same chat frame and tail cut, ``TransformersExtractor.token_ids``) and this
script keeps, per prompt, seven numbers: the mean, standard deviation and 90th percentile of the
next-token negative log-likelihood over the prompt's tokens, the share of tokens it puts under
1 % probability, the mean and last-position entropy of its next-token distribution (nats), and
the log of the token count. Written as ``lm-signals.npy`` (float32, ``[n, 7]``) with
``lm-signals-meta.json`` (ids, column names, timing).

Usage (on the GPU machine, after ``lobo.py texts``)::

    python benchmarks/lobo_lm_signals.py --texts texts.jsonl.gz --model-dir DIR --out OUT
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

COLUMNS = ["nll_mean", "nll_std", "nll_p90", "share_under_1pct", "entropy_mean", "entropy_last", "log_tokens"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--texts", required=True)
    p.add_argument("--model-dir", required=True, help="folder holding SmolLM2-135M-Instruct.Q4_1.gguf")
    p.add_argument("--out", required=True)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--limit", type=int)
    args = p.parse_args(argv)

    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from switchyard.features import build_extractor

    opener: Any = gzip.open if args.texts.endswith(".gz") else open
    with opener(args.texts, "rt") as fh:
        items = [json.loads(line) for line in fh]
    if args.limit:
        items = items[: args.limit]
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    config = {
        "backend": "transformers",
        "model": args.model_dir,
        "gguf_file": gguf,
        "name": "SmolLM2-135M-Instruct",
        "layers": [30],
        "pooling": ["last"],
        "max_tokens": 512,
        "truncation": "tail",
    }
    extractor: Any = build_extractor(config)
    t0 = time.perf_counter()
    ids = extractor.token_ids([o["text"] for o in items])
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, gguf_file=gguf, dtype=torch.float32).to(dev).eval()
    out = np.zeros((len(ids), len(COLUMNS)), np.float32)
    # Sorted by length so a batch pads little; right padding, positions masked out below.
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    with torch.inference_mode():
        for start in range(0, len(order), args.batch_size):
            chunk = order[start : start + args.batch_size]
            width = max(len(ids[i]) for i in chunk)
            tok = torch.zeros((len(chunk), width), dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for r, i in enumerate(chunk):
                tok[r, : len(ids[i])] = torch.tensor(ids[i])
                mask[r, : len(ids[i])] = 1
            tok, mask = tok.to(dev), mask.to(dev)
            logp = torch.log_softmax(model(input_ids=tok, attention_mask=mask).logits.float(), dim=-1)
            entropy = -(logp.exp() * logp).sum(-1)  # [b, t]
            nll = -logp[:, :-1].gather(-1, tok[:, 1:, None])[..., 0]  # token t+1 given the prefix
            for r, i in enumerate(chunk):
                n = len(ids[i])
                v = nll[r, : n - 1].double().cpu().numpy() if n > 1 else np.zeros(1)
                e = entropy[r, :n].double().cpu().numpy()
                out[i] = [
                    v.mean(),
                    v.std(),
                    np.quantile(v, 0.9),
                    (v > np.log(100.0)).mean(),
                    e.mean(),
                    e[-1],
                    np.log(n),
                ]
            if start // args.batch_size % 100 == 0:
                print(f"lm signals {start + len(chunk)}/{len(order)}", file=sys.stderr, flush=True)
    took = time.perf_counter() - t0
    dest = Path(args.out)
    dest.mkdir(parents=True, exist_ok=True)
    np.save(dest / "lm-signals.npy", out)
    meta = {"columns": COLUMNS, "n": len(ids), "seconds": took, "device": dev, "ids": [o["id"] for o in items]}
    (dest / "lm-signals-meta.json").write_text(json.dumps(meta))
    print(f"lm signals of {len(ids)} prompts in {took:.1f}s; column means {out.mean(0).round(3).tolist()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
