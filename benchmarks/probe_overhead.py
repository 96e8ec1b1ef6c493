"""Serving overhead of a learned router's decision with the features already in hand.

Times ``LearnedRouter.route`` end to end (task text, cache miss, numpy probe, λ-utility policy,
Decision) with an extractor that returns a precomputed vector, so the number is the probe's own
cost, not the feature server's. The checkpoint is the MiniLM probe's shape (7 layers x mean+last x
384 = 5,376 features, PCA 128, MLP 256-128, 5 members) unless --checkpoint names a trained one.

    python benchmarks/probe_overhead.py [--checkpoint examples/probe/minilm] [--n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from switchyard.protocol.features import FeatureRecipe
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo
from switchyard.routers.base import RouteContext
from switchyard.routers.learned import checkpoint as ckpt
from switchyard.routers.learned.base import LearnedRouter
from switchyard.routers.learned.policy import UtilityPolicy
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall


class Given:
    def __init__(self, recipe: FeatureRecipe, dim: int) -> None:
        self.recipe = recipe
        self.vector = np.random.default_rng(0).standard_normal((1, dim)).astype(np.float32)

    async def extract(self, texts: Sequence[str]) -> Any:
        return self.vector

    async def aclose(self) -> None:
        return None


def synthetic(kind: str) -> ckpt.Checkpoint:
    rng = np.random.default_rng(0)
    d, p = 7 * 2 * 384, 128
    recipe = FeatureRecipe("transformers", "all-MiniLM-L6-v2", tuple(range(7)), ("mean", "last"), 384, False, 256)
    comps = np.linalg.qr(rng.standard_normal((d, p)))[0].T.astype(np.float32)
    t = ckpt.Transform(
        rng.standard_normal(d).astype(np.float32), np.ones(d, np.float32), np.zeros(d, np.float32), comps
    )
    if kind == "knn":
        pts = rng.standard_normal((12276, p)).astype(np.float32)
        labels = (rng.random((12276, 2)) < 0.7).astype(np.float32)
        return ckpt.Checkpoint(
            "knn", ["efficient", "capable"], recipe, t, points=pts, labels=labels, k=200, weighting="uniform"
        )

    def lin(o: int, i: int) -> tuple[Any, Any]:
        return (rng.standard_normal((o, i)).astype(np.float32) * 0.05, np.zeros(o, np.float32))

    members = [ckpt.Member([lin(256, p), lin(128, 256)], lin(2, 128)) for _ in range(5)]
    return ckpt.Checkpoint("prefill_probe", ["efficient", "capable"], recipe, t, members=members)


async def bench(router: LearnedRouter, n: int) -> list[float]:
    ctx = RouteContext(route="r", session=SessionInfo(), targets={}, store=MemoryStore())
    call = ScriptedCall({})
    requests = [
        ChatRequest.model_validate(
            {
                "model": "r",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": f"task number {i}: fix the failing test"}]}
                ],
            }
        )
        for i in range(n)
    ]
    for r in requests[:50]:
        await router.route(r, ctx, call)
    router.cache = type(router.cache)(0)  # every decision below is a cache miss
    out = []
    for r in requests:
        t0 = time.perf_counter()
        await router.route(r, ctx, call)
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", help="a trained checkpoint directory (default: synthetic, same shape)")
    ap.add_argument("--n", type=int, default=2000)
    args = ap.parse_args()
    for kind in ("prefill_probe", "knn"):
        if args.checkpoint:
            path = args.checkpoint if kind == "prefill_probe" else f"{args.checkpoint}/knn"
            try:
                cp = ckpt.load(path, kind=kind)
            except ckpt.CheckpointError as exc:
                print(f"{kind}: skipped ({exc})")
                continue
        else:
            cp = synthetic(kind)
        policy = UtilityPolicy(["efficient", "capable"], [0.5, 90.0], lam=0.75)
        router = LearnedRouter(cp, [0, 1], policy, Given(cp.recipe, cp.transform.dim), source=kind)
        us = sorted(asyncio.run(bench(router, args.n)))
        p50, p99 = statistics.median(us), us[int(0.99 * len(us)) - 1]
        print(
            f"{kind:14} features {cp.transform.dim}  decisions {len(us)}  p50 {p50:7.1f} us  p99 {p99:7.1f} us  "
            f"mean {statistics.fmean(us):7.1f} us"
        )
    print("command: python " + " ".join(sys.argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
