"""How fast ``switchyard eval`` and ``switchyard replay`` decide recorded items (decide only).

Run:
    .venv/bin/python benchmarks/eval_throughput.py [DATA_DIR] [--learned N]

DATA_DIR defaults to ``$SWITCHYARD_DATA_DIR`` or ``<repo>/../shared/data``. Prints decisions per
second for the routellm-evals dataset (random route) and assistant turns per second for the
tau-bench trajectories, with the command that produced them.

``--learned N`` also measures a learned route on the first N routellm-evals prompts with the
bundled MiniLM features (``examples/probe/minilm-features.yaml`` at 128 tokens, on this
machine's CPU or GPU): seconds per prompt of training-style extraction (one ``extract`` call over
all texts), of ``switchyard eval`` on a ``prefill_probe`` route (which pre-extracts every item's
text in batches), and of the same eval deciding one item at a time (pre-extraction off: how eval
ran before). The checkpoint is a random linear probe of the right width: speed does not depend
on the weights.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
import time
from pathlib import Path

from switchyard.config.load import load_config
from switchyard.eval.dataset import Dataset
from switchyard.eval.evaluate import run_eval
from switchyard.eval.replay import replay

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    given = [a for a in sys.argv[1:] if not a.startswith("--") and not a.isdigit()]
    root = Path(given[0] if given else os.environ.get("SWITCHYARD_DATA_DIR", REPO.parent / "shared/data"))
    evals = root / "routellm-evals" / "routellm_evals.jsonl"
    tau = root / "tau-bench-trajectories" / "tau_bench_airline_gpt4o.jsonl"
    if not evals.is_file() or not tau.is_file():
        print(f"data not found under {root}", file=sys.stderr)
        return 1
    loaded = load_config(REPO / "examples" / "eval" / "routellm.yaml")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpu(s)")

    t0 = time.perf_counter()
    result = asyncio.run(run_eval(loaded, "mix", Dataset(evals), progress=False))
    dt = time.perf_counter() - t0
    print(f"eval   routellm-evals, route mix (random): {result.row.n} items in {dt:.2f} s = {result.row.n / dt:,.0f}/s")

    t0 = time.perf_counter()
    summary = asyncio.run(replay(loaded, "mix", tau, progress=False))
    dt = time.perf_counter() - t0
    turns = len(summary.turns)
    print(f"replay tau-bench airline, route mix: {turns} turns in {dt:.2f} s = {turns / dt:,.0f}/s")
    if "--learned" in sys.argv:
        learned(evals, int(sys.argv[sys.argv.index("--learned") + 1]))
    print("command: .venv/bin/python benchmarks/eval_throughput.py " + " ".join(sys.argv[1:]))
    return 0


def learned(evals: Path, n: int) -> None:
    """Per-prompt time of training extraction vs ``switchyard eval`` on a learned route."""
    import json
    import tempfile

    import numpy as np
    import yaml

    import switchyard.eval.evaluate as evaluate
    from switchyard.features import build_extractor, parse_features
    from switchyard.routers.learned import checkpoint as ckpt

    features = yaml.safe_load((REPO / "examples/probe/minilm-features.yaml").read_text()) | {"max_tokens": 128}
    with evals.open() as fh:
        rows = [json.loads(line) for _, line in zip(range(n), fh, strict=False)]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "items.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        warm = build_extractor(parse_features(features))  # imports torch, reads the weights once

        async def warm_up() -> None:
            await warm.extract(["warm up"])
            await warm.aclose()

        asyncio.run(warm_up())
        t0 = time.perf_counter()  # both sides include loading the model, as train-probe and eval do
        extractor = build_extractor(parse_features(features))
        recipe = extractor.recipe

        async def train_style() -> float:
            await extractor.extract([r["prompt"] for r in rows])
            dt = time.perf_counter() - t0
            await extractor.aclose()
            return dt

        t_train = asyncio.run(train_style())
        dim = recipe.dim or 0
        rng = np.random.default_rng(0)
        transform = ckpt.Transform(
            np.zeros(dim, np.float32),
            np.ones(dim, np.float32),
            np.zeros(dim, np.float32),
            (rng.standard_normal((8, dim)) / np.sqrt(dim)).astype(np.float32),
        )
        head = (rng.standard_normal((2, 8)).astype(np.float32), np.zeros(2, np.float32))
        probe = ckpt.Checkpoint("prefill_probe", ["efficient", "capable"], recipe, transform, [ckpt.Member([], head)])
        ckpt.save(probe, Path(tmp) / "cp")
        config = yaml.safe_load((REPO / "examples/probe/router.yaml").read_text())
        config["routes"] = {
            "agent": {
                "type": "prefill_probe",
                "targets": ["efficient", "capable"],
                "capable": "capable",
                "checkpoint": str(Path(tmp) / "cp"),
                "features": features,
                "threshold": 0.5,
            }
        }
        loaded = load_config(config)
        mapping = {"efficient": "mistralai/Mixtral-8x7B-Instruct-v0.1", "capable": "gpt-4-1106-preview"}

        def timed() -> float:
            t0 = time.perf_counter()
            asyncio.run(run_eval(loaded, "agent", Dataset(data), mapping=mapping, progress=False))
            return time.perf_counter() - t0

        t_eval = timed()
        batched = evaluate._prefetch
        try:

            async def off(*args: object) -> None:
                return None

            evaluate._prefetch = off  # type: ignore[assignment]
            t_one = timed()
        finally:
            evaluate._prefetch = batched
    per = [t * 1000 / n for t in (t_train, t_eval, t_one)]
    print(
        f"learned route, MiniLM (128 tokens), {n} prompts: training extraction {per[0]:.1f} ms/prompt; "
        f"eval {per[1]:.1f} ms/prompt ({per[1] / per[0]:.2f}x training; both include loading the model); "
        f"eval one item at a time {per[2]:.1f} ms/prompt ({per[2] / per[0]:.2f}x)"
    )


if __name__ == "__main__":
    sys.exit(main())
