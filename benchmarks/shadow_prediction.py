"""Shadow mode's predicted saving against the saving measured when the same sessions are routed
(issue 48's target: within 2 points).

A fake upstream on 127.0.0.1 answers as ``fake-efficient`` and ``fake-capable``; the length of
each answer is drawn from the request (so a request gets the same length in both runs), and the
efficient model writes ``--verbosity`` times as much as the capable one (1.0: the same). 300
simulated coding-agent sessions (2-7 turns; a tool result fails with a traceback with
probability 0.3, which makes the stage router escalate) are sent twice, in-process, through a
stage-router route:

1. with ``experiment: {mode: shadow, mirror_share: M}``: the capable model serves every request;
   the records hold the baseline's cost and ``would_cost_usd``, the router's choice priced at the
   same tokens, and for the mirrored sessions (a sticky share ``M``) ``details.mirror``: what the
   router's choice really cost when sent the same request after the answer. ``switchyard stats
   --experiment``'s estimator (``experiment_stats``) reads the records as a decision log would
   hold them: predicted saving = its ``predicted_saved_share`` — corrected by the mirrors when
   ``M`` > 0, priced at equal verbosity when ``M`` = 0 — with its 95 % session-bootstrap interval;
2. routed, on a fresh router: measured saving = 1 - Σ cost / Σ baseline cost of run 1 (its
   answers only: the mirrors' cost is an expense of the experiment, reported apart).

Without mirrors the prediction prices the capable model's output tokens at the efficient model's
price, so a wordier efficient model makes it optimistic: the gap grows with ``--verbosity``.

Usage:
    python benchmarks/shadow_prediction.py            # verbosity 1.0, 1.5, 3.0 x mirror share 0, 0.1, 0.25
    python benchmarks/shadow_prediction.py --sessions 100 --verbosity 1.0 --mirror-share 0.1
    python benchmarks/shadow_prediction.py --jitter 0.5 --efficient-price 1 5 --seeds 10   # the stress case
    python benchmarks/shadow_prediction.py --out benchmarks/results/shadow_prediction-20261205.json
    python benchmarks/shadow_prediction.py --verbosity 3 --mirror-share 0.1 --log-dir /tmp  # then:
    switchyard stats /tmp/shadow-verbosity3-jitter0-mirror0.1.jsonl --experiment
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from switchyard import Switchyard
from switchyard.engine.experiment_stats import experiment_stats
from switchyard.testing import FakeUpstream, serve_fake
from switchyard.testing.fake_common import FakeModel, Turn, last_user_text, prompt_text

TRACEBACK = "Traceback (most recent call last):\n  File 'app.py', line 3\nValueError: bad input"


def brain(verbosity: float, jitter: float = 0.0) -> Any:
    """Answers whose length is fixed by the request; the efficient model's is ``verbosity`` times
    the capable one's, times a log-normal factor of spread ``jitter`` drawn from the request (0:
    always exactly ``verbosity`` times; with a spread, ``verbosity`` is the median)."""

    def answer(body: dict[str, Any], model: FakeModel) -> Turn:
        digest = hashlib.sha256(prompt_text(body).encode()).digest()
        words = 40 + digest[0] * 2  # 40-550 words, fixed by the request
        if model.name == "fake-efficient":
            spread = math.exp(jitter * random.Random(digest[1:9]).gauss(0.0, 1.0)) if jitter else 1.0
            words = int(words * verbosity * spread)
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


EFFICIENT_PRICE = {"input_per_mtok": 0.1, "output_per_mtok": 0.4}
"""The efficient target's price (``--efficient-price``); the capable one's is 3 / 15."""


def config(port: int, shadow: bool, mirror_share: float = 0.0) -> dict[str, Any]:
    route: dict[str, Any] = {"type": "stage_router", "capable": "capable", "efficient": "efficient"}
    if shadow:
        # Room for every mirror: a skipped one (``busy``) would make the measured set depend on
        # the machine's load (docs/rollout.md, "Mirroring").
        route["experiment"] = {"mode": "shadow", "mirror_share": mirror_share, "mirror_concurrency": 256}
    return {
        "llm_clients": {"local": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"}},
        "targets": {
            "efficient": {
                "client": "local",
                "model": "fake-efficient",
                "price": dict(EFFICIENT_PRICE),
            },
            "capable": {
                "client": "local",
                "model": "fake-capable",
                "price": {"input_per_mtok": 3, "output_per_mtok": 15},
            },
        },
        "routes": {"agent": route},
    }


async def run(port: int, shadow: bool, work: list[list[list[dict[str, Any]]]], mirror_share: float = 0.0) -> list[Any]:
    """The decision records of ``work`` as the sinks get them (a mirrored record once its mirror ended)."""
    records: list[Any] = []
    sent = 0
    async with Switchyard.from_config(config(port, shadow, mirror_share)) as sy:
        sy.on_decision(records.append)
        for i, turns in enumerate(work):
            for messages in turns:
                await sy.complete(model="agent", messages=messages, session_id=f"s{i}")
                sent += 1
        deadline = time.monotonic() + 60
        while len(records) < sent and time.monotonic() < deadline:  # the last mirrors, bounded
            await asyncio.sleep(0.01)
    if len(records) < sent:
        raise RuntimeError(f"{sent - len(records)} records never arrived")
    by_id = {r.request_id: r for r in records}
    return sorted(by_id.values(), key=lambda r: r.ts)


def measure(
    verbosity: float, count: int, seed: int, shares: list[float], log_dir: str | None = None, jitter: float = 0.0
) -> list[dict[str, Any]]:
    answers = brain(verbosity, jitter)
    upstream = FakeUpstream([FakeModel("fake-efficient", answers), FakeModel("fake-capable", answers)])
    server = serve_fake(upstream)
    try:
        work = sessions(count, seed)
        routed = asyncio.run(run(server.port, False, work))
        shadows = {share: asyncio.run(run(server.port, True, work, share)) for share in shares}
    finally:
        server.stop()
    spent = sum(r.total_cost_usd for r in routed)
    out = []
    for share, shadowed in shadows.items():
        baseline = sum(r.total_cost_usd - r.experiment_cost_usd for r in shadowed)
        lines = [json.loads(r.to_json()) for r in shadowed]
        if log_dir:  # the shadow run's decision log, for `switchyard stats --experiment`
            path = Path(log_dir) / f"shadow-verbosity{verbosity:g}-jitter{jitter:g}-mirror{share:g}.jsonl"
            path.write_bytes(b"".join(r.to_json() + b"\n" for r in shadowed))
        view = experiment_stats(lines)["agent"]["shadow"]
        predicted, measured = view["predicted_saved_share"], 1 - spent / baseline
        bounds = view.get("predicted_saved_share_interval") or {}
        agree = sum(a.details["would_select"] == b.selected for a, b in zip(shadowed, routed, strict=True))
        out.append(
            {
                "verbosity": verbosity,
                "jitter": jitter,
                "mirror_share": share,
                "sessions": count,
                "requests": len(routed),
                "same_choice": agree / len(routed),
                "efficient_share": sum(r.selected == "efficient" for r in routed) / len(routed),
                "basis": view["basis"],
                "mirrored_sessions": view["mirrored_sessions"],
                "mirrored_requests": view["mirrored_requests"],
                "mirrors_not_sent": view["mirror_skipped"],
                # A request that failed (a loaded machine's timeout) or fell back would skew both
                # sides: counted, and the run is marked unusable when there is any.
                "failed_or_fell_back": {
                    "shadow": sum(r.status >= 400 or r.fallbacks_tried > 0 for r in shadowed),
                    "routed": sum(r.status >= 400 or r.fallbacks_tried > 0 for r in routed),
                },
                "mirrors_failed": view["mirror_failures"],
                "cost_ratio": view.get("cost_ratio"),
                "predicted_saved": predicted,
                "predicted_low": bounds.get("low"),
                "predicted_high": bounds.get("high"),
                "equal_verbosity_saved": view["equal_verbosity"]["predicted_saved_share"],
                "measured_saved": measured,
                "gap_points": 100 * (predicted - measured),
                "measured_inside_interval": (
                    bounds.get("low") is not None and bounds["low"] <= measured <= bounds["high"]
                ),
                "mirror_cost_usd": view["mirror_cost_usd"],
                "mirror_cost_share_of_baseline": view["mirror_cost_usd"] / baseline,
                "baseline_usd": baseline,
            }
        )
    return out


def seed_summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per verbosity and mirror share, over seeds: the gaps, and how often the interval held the
    measured saving."""
    out = []
    for key in sorted({(r["verbosity"], r["mirror_share"]) for r in results}):
        rows = [r for r in results if (r["verbosity"], r["mirror_share"]) == key]
        gaps = [abs(r["gap_points"]) for r in rows]
        widths = [(r["predicted_high"] - r["predicted_low"]) * 50 for r in rows if r["predicted_low"] is not None]
        out.append(
            {
                "verbosity": key[0],
                "mirror_share": key[1],
                "seeds": len(rows),
                "mean_abs_gap": sum(gaps) / len(gaps),
                "max_abs_gap": max(gaps),
                "within_2_points": sum(g <= 2 for g in gaps),
                "inside_interval": sum(r["measured_inside_interval"] for r in rows),
                "mean_half_width": sum(widths) / len(widths) if widths else None,
                "mirror_cost_share": sum(r["mirror_cost_share_of_baseline"] for r in rows) / len(rows),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--seeds", type=int, default=1, help="run seeds SEED .. SEED+N-1 (new sessions each) and summarise the gaps"
    )
    parser.add_argument("--verbosity", type=float, nargs="+", default=[1.0, 1.5, 3.0])
    parser.add_argument("--mirror-share", type=float, nargs="+", default=[0.0, 0.1, 0.25])
    parser.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        help="per-request spread of the efficient model's verbosity (log-normal sigma; 0: a fixed multiple)",
    )
    parser.add_argument("--out", help="also write the results as JSON to this file")
    parser.add_argument("--log-dir", help="also write each shadow run's decision log (JSONL) into this folder")
    parser.add_argument(
        "--efficient-price",
        type=float,
        nargs=2,
        metavar=("IN", "OUT"),
        default=[0.1, 0.4],
        help="the efficient target's USD per million input and output tokens (the capable one's: 3 and 15)",
    )
    args = parser.parse_args()
    EFFICIENT_PRICE.update(input_per_mtok=args.efficient_price[0], output_per_mtok=args.efficient_price[1])
    started = time.perf_counter()
    results = [
        {**r, "seed": seed}
        for seed in range(args.seed, args.seed + args.seeds)
        for v in args.verbosity
        for r in measure(v, args.sessions, seed, args.mirror_share, args.log_dir, args.jitter)
    ]
    broken = [r for r in results if any(r["failed_or_fell_back"].values())]
    if broken:
        print(
            f"warning: {len(broken)} runs had failed or fallen-back requests (load?): their gaps are not "
            "the estimator's"
        )
    for r in results if args.seeds == 1 else ():
        shown = f"{r['predicted_saved']:.1%}"
        if r["predicted_low"] is not None:
            shown += f" [{r['predicted_low']:.1%}, {r['predicted_high']:.1%}]"
        print(
            f"verbosity x{r['verbosity']:g} (jitter {r['jitter']:g}) mirror {r['mirror_share']:g}: "
            f"{r['requests']} requests, "
            f"{r['efficient_share']:.0%} efficient, same choice {r['same_choice']:.0%}; "
            f"{r['mirrored_sessions']} mirrored sessions; predicted {shown} ({r['basis']}), "
            f"measured {r['measured_saved']:.1%}, gap {r['gap_points']:+.2f} points; "
            f"mirrors ${r['mirror_cost_usd']:.4f} = {r['mirror_cost_share_of_baseline']:.1%} of the baseline"
        )
    over_seeds = seed_summary(results)
    for row in over_seeds if args.seeds > 1 else ():
        print(
            f"verbosity x{row['verbosity']:g} mirror {row['mirror_share']:g}, {row['seeds']} seeds: "
            f"|gap| mean {row['mean_abs_gap']:.2f} max {row['max_abs_gap']:.2f} points, within 2 points in "
            f"{row['within_2_points']}, measured inside the interval in {row['inside_interval']}, "
            f"interval half-width {'-' if row['mean_half_width'] is None else format(row['mean_half_width'], '.2f')}"
            f" points, mirrors {row['mirror_cost_share']:.1%}"
        )
    summary = {
        "efficient_price": EFFICIENT_PRICE,
        "jitter": args.jitter,
        "over_seeds": over_seeds,
        "results": results,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
