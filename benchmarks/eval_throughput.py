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

For the GPU (docs/learned-routers.md "Speed"): ``--features FILE`` takes another features block
(YAML, e.g. ``examples/probe/smollm2-features.yaml``) as it is, ``--model-dir DIR`` points its
``model`` at a local folder, ``--items FILE`` reads the prompts from another routellm-evals-style
JSONL, ``--learned-only`` skips the random-route and replay timings (whose data may be absent),
``--one-by-one M`` times the one-at-a-time eval on the first M prompts only (it is the slow
path) and ``--json FILE`` writes the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", default=os.environ.get("SWITCHYARD_DATA_DIR", str(REPO.parent / "shared/data")))
    p.add_argument("--learned", type=int, default=0, help="prompts for the learned-route timing (0: skip it)")
    p.add_argument("--features", help="features block (YAML); default MiniLM at 128 tokens")
    p.add_argument("--model-dir", help="local folder for the features' model")
    p.add_argument("--items", help="routellm-evals-style JSONL to read the prompts from")
    p.add_argument("--learned-only", action="store_true")
    p.add_argument("--one-by-one", type=int, help="prompts for the one-at-a-time eval (default: --learned)")
    p.add_argument("--json")
    args = p.parse_args(argv)
    root = Path(args.data)
    evals = Path(args.items) if args.items else root / "routellm-evals" / "routellm_evals.jsonl"
    tau = root / "tau-bench-trajectories" / "tau_bench_airline_gpt4o.jsonl"
    if not evals.is_file() or (not args.learned_only and not tau.is_file()):
        print(f"data not found under {root}", file=sys.stderr)
        return 1
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpu(s)")
    if not args.learned_only:
        loaded = load_config(REPO / "examples" / "eval" / "routellm.yaml")
        t0 = time.perf_counter()
        result = asyncio.run(run_eval(loaded, "mix", Dataset(evals), progress=False))
        dt = time.perf_counter() - t0
        rate = result.row.n / dt
        print(f"eval   routellm-evals, route mix (random): {result.row.n} items in {dt:.2f} s = {rate:,.0f}/s")

        t0 = time.perf_counter()
        summary = asyncio.run(replay(loaded, "mix", tau, progress=False))
        dt = time.perf_counter() - t0
        turns = len(summary.turns)
        print(f"replay tau-bench airline, route mix: {turns} turns in {dt:.2f} s = {turns / dt:,.0f}/s")
    if args.learned:
        numbers = learned(evals, args.learned, args.features, args.model_dir, args.one_by_one)
        if args.json:
            Path(args.json).write_text(json.dumps(numbers, indent=1))
    given = argv if argv is not None else sys.argv[1:]
    print("command: .venv/bin/python benchmarks/eval_throughput.py " + " ".join(given))
    return 0


def learned(
    evals: Path, n: int, features_file: str | None, model_dir: str | None, one_by_one: int | None
) -> dict[str, object]:
    """Per-prompt time of training extraction vs ``switchyard eval`` on a learned route."""
    import tempfile

    import numpy as np
    import yaml

    import switchyard.eval.evaluate as evaluate
    from switchyard.features import build_extractor, parse_features
    from switchyard.routers.learned import checkpoint as ckpt

    if features_file:
        features = yaml.safe_load(Path(features_file).read_text())
    else:
        features = yaml.safe_load((REPO / "examples/probe/minilm-features.yaml").read_text()) | {"max_tokens": 128}
    if model_dir:
        features["model"] = model_dir
    with evals.open() as fh:
        rows = [json.loads(line) for _, line in zip(range(n), fh, strict=False)]
    m = min(one_by_one or n, n)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "items.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        few = Path(tmp) / "few.jsonl"
        few.write_text("".join(json.dumps(r) + "\n" for r in rows[:m]))
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

        def timed(items: Path) -> float:
            t0 = time.perf_counter()
            asyncio.run(run_eval(loaded, "agent", Dataset(items), mapping=mapping, progress=False))
            return time.perf_counter() - t0

        t_eval = timed(data)
        batched = evaluate._prefetch
        try:

            async def off(*args: object) -> None:
                return None

            evaluate._prefetch = off  # type: ignore[assignment]
            t_one = timed(few)
        finally:
            evaluate._prefetch = batched
    per = [t_train * 1000 / n, t_eval * 1000 / n, t_one * 1000 / m]
    name = features.get("name", features.get("model"))
    device = str(getattr(extractor, "device", "?"))
    print(
        f"learned route, {name} ({features.get('max_tokens')} tokens, device {device}), {n} prompts: "
        f"training extraction {per[0]:.2f} ms/prompt; eval {per[1]:.2f} ms/prompt ({per[1] / per[0]:.2f}x training; "
        f"both include loading the model); eval one item at a time ({m} prompts) {per[2]:.2f} ms/prompt "
        f"({per[2] / per[0]:.2f}x)"
    )
    return {
        "features": features,
        "device": device,
        "n": n,
        "n_one_by_one": m,
        "seconds": {"training_extraction": t_train, "eval_batched": t_eval, "eval_one_by_one": t_one},
        "ms_per_prompt": {"training_extraction": per[0], "eval_batched": per[1], "eval_one_by_one": per[2]},
    }


if __name__ == "__main__":
    sys.exit(main())
