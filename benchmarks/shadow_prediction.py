"""Shadow mode's predicted saving against the saving measured when the same sessions are routed
(issue 48's target: within 2 points).

A fake upstream on 127.0.0.1 answers as ``fake-efficient`` and ``fake-capable``; the length of
each answer is drawn from the request (so a request gets the same length in both runs), and the
efficient model writes ``--verbosity`` times as much as the capable one (1.0: the same). 300
simulated coding-agent sessions (2-7 turns; a tool result fails with a traceback with
probability 0.3, which makes the stage router escalate) are sent twice, in-process, through a
stage-router route:

1. with ``experiment: {mode: shadow}``: the capable model serves every request; the records hold
   the baseline's cost and ``would_cost_usd``, the router's choice priced at the same tokens —
   predicted saving = 1 - Σ would-cost / Σ baseline cost;
2. routed, on a fresh router: measured saving = 1 - Σ cost / Σ baseline cost of run 1.

The shadow's prediction prices the capable model's output tokens at the efficient model's price,
so a wordier efficient model makes it optimistic: the gap grows with ``--verbosity``.

Usage:
    python benchmarks/shadow_prediction.py                       # verbosity 1.0, 1.5 and 3.0
    python benchmarks/shadow_prediction.py --sessions 100 --verbosity 1.0
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from switchyard import Switchyard
from switchyard.testing import FakeUpstream, serve_fake
from switchyard.testing.fake_common import FakeModel, Turn, last_user_text, prompt_text

TRACEBACK = "Traceback (most recent call last):\n  File 'app.py', line 3\nValueError: bad input"


def brain(verbosity: float) -> Any:
    def answer(body: dict[str, Any], model: FakeModel) -> Turn:
        digest = hashlib.sha256(prompt_text(body).encode()).digest()
        words = 40 + digest[0] * 2  # 40-550 words, fixed by the request
        if model.name == "fake-efficient":
            words = int(words * verbosity)
        return Turn(text=("done " * words).strip() + f" ({last_user_text(body)[:20]})")

    return answer


def sessions(count: int, seed: int) -> list[list[list[dict[str, Any]]]]:
    """Per session, the message list of each of its requests (the history grows turn by turn)."""
    rng = random.Random(seed)
    out = []
    for s in range(count):
        history: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": f"Fix issue #{s} in the parser."},
        ]
        turns = []
        for t in range(rng.randint(2, 7)):
            turns.append(list(history))
            call = {
                "id": f"c{t}",
                "type": "function",
                "function": {"name": "Bash", "arguments": '{"command": "pytest"}'},
            }
            history.append({"role": "assistant", "content": None, "tool_calls": [call]})
            result = TRACEBACK if rng.random() < 0.3 else "5 passed in 0.2s"
            history.append({"role": "tool", "tool_call_id": f"c{t}", "content": result})
        out.append(turns)
    return out


def config(port: int, shadow: bool) -> dict[str, Any]:
    route: dict[str, Any] = {"type": "stage_router", "capable": "capable", "efficient": "efficient"}
    if shadow:
        route["experiment"] = {"mode": "shadow"}
    return {
        "llm_clients": {"local": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"}},
        "targets": {
            "efficient": {
                "client": "local",
                "model": "fake-efficient",
                "price": {"input_per_mtok": 0.1, "output_per_mtok": 0.4},
            },
            "capable": {
                "client": "local",
                "model": "fake-capable",
                "price": {"input_per_mtok": 3, "output_per_mtok": 15},
            },
        },
        "routes": {"agent": route},
    }


async def run(port: int, shadow: bool, work: list[list[list[dict[str, Any]]]]) -> list[Any]:
    records = []
    async with Switchyard.from_config(config(port, shadow)) as sy:
        for i, turns in enumerate(work):
            for messages in turns:
                done = await sy.complete(model="agent", messages=messages, session_id=f"s{i}")
                records.append(done.record)
    return records


def measure(verbosity: float, count: int, seed: int) -> dict[str, Any]:
    upstream = FakeUpstream(
        [FakeModel("fake-efficient", brain(verbosity)), FakeModel("fake-capable", brain(verbosity))]
    )
    server = serve_fake(upstream)
    try:
        work = sessions(count, seed)
        shadowed = asyncio.run(run(server.port, True, work))
        routed = asyncio.run(run(server.port, False, work))
    finally:
        server.stop()
    baseline = sum(r.total_cost_usd for r in shadowed)
    would = sum(r.details["would_cost_usd"] + r.router_cost.cost_usd + r.feature_cost_usd for r in shadowed)
    spent = sum(r.total_cost_usd for r in routed)
    agree = sum(a.details["would_select"] == b.selected for a, b in zip(shadowed, routed, strict=True))
    predicted, measured = 1 - would / baseline, 1 - spent / baseline
    return {
        "verbosity": verbosity,
        "sessions": count,
        "requests": len(routed),
        "same_choice": agree / len(routed),
        "efficient_share": sum(r.selected == "efficient" for r in routed) / len(routed),
        "predicted_saved": predicted,
        "measured_saved": measured,
        "gap_points": 100 * (predicted - measured),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbosity", type=float, nargs="+", default=[1.0, 1.5, 3.0])
    args = parser.parse_args()
    started = time.perf_counter()
    results = [measure(v, args.sessions, args.seed) for v in args.verbosity]
    for r in results:
        print(
            f"efficient verbosity x{r['verbosity']:g}: {r['requests']} requests, {r['efficient_share']:.0%} efficient, "
            f"same choice {r['same_choice']:.0%}; predicted saving {r['predicted_saved']:.1%}, measured "
            f"{r['measured_saved']:.1%}, gap {r['gap_points']:+.2f} points"
        )
    print(json.dumps({"results": results, "elapsed_s": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main()
