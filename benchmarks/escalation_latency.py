"""What an escalation route costs a streaming caller in latency.

An escalation route buffers the efficient model's whole turn and waits for the judge before the
caller sees a token; the buffered answer is then replayed as a stream. This script measures that
against streaming the same efficient model directly, through the proxy, with the real openai
SDK, over the fake upstream on 127.0.0.1 (no GPU, no keys).

Run:
    .venv/bin/python benchmarks/escalation_latency.py [--requests 20] [--words 120]
        [--first-byte-ms 50] [--per-token-ms 5] [--judge-ms 200]

Prints median / p90 time to first content token (TTFT) and to the last byte for:
  direct    passthrough to the efficient model, streamed
  watched   escalation route (efficient buffered + judge), replayed as a stream
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import openai

from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, Turn, serve_fake
from switchyard.testing.judges import escalation_brain


def _answer(words: int) -> Any:
    text = " ".join(f"word{i}" for i in range(words))

    def brain(body: dict[str, Any], model: FakeModel) -> Turn:
        return Turn(text=text)

    return brain


def _measure(client: openai.OpenAI, route: str, n: int) -> tuple[list[float], list[float]]:
    ttft: list[float] = []
    total: list[float] = []
    for i in range(n):
        started = time.perf_counter()
        first: float | None = None
        stream = client.chat.completions.create(
            model=route,
            messages=[{"role": "user", "content": f"task {i}"}],
            stream=True,
            extra_headers={"x-switchyard-session-id": f"{route}-{i}"},
        )
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
        total.append(time.perf_counter() - started)
        ttft.append(first if first is not None else total[-1])
    return ttft, total


def _row(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{name:<22} median {statistics.median(values) * 1000:8.1f} ms   p90 {p90 * 1000:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--words", type=int, default=120, help="length of the efficient answer")
    parser.add_argument("--first-byte-ms", type=float, default=50.0, help="efficient model time to first token")
    parser.add_argument("--per-token-ms", type=float, default=5.0, help="efficient model time per streamed word")
    parser.add_argument("--judge-ms", type=float, default=200.0, help="judge latency (one short JSON answer)")
    args = parser.parse_args()

    weak = FakeModel(
        "bench-weak",
        brain=_answer(args.words),
        first_byte_s=args.first_byte_ms / 1000,
        per_chunk_s=args.per_token_ms / 1000,
        paced_json=True,
    )
    judge = FakeModel("bench-judge", brain=escalation_brain(lambda view: False), first_byte_s=args.judge_ms / 1000)
    server = serve_fake(FakeUpstream([weak, judge]))
    config = {
        "llm_clients": {"local": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{server.port}/v1"}},
        "targets": {
            "efficient": {"client": "local", "model": "bench-weak"},
            "capable": {"client": "local", "model": "bench-strong"},
            "judge": {"client": "local", "model": "bench-judge"},
        },
        "routes": {
            "direct": {"type": "passthrough", "target": "efficient"},
            "watched": {
                "type": "llm_classifier",
                "mode": "escalation",
                "classifier_target": "judge",
                "strong_target": "capable",
                "weak_target": "efficient",
            },
        },
    }
    try:
        sy = Switchyard.from_config(config)
        with ServerThread(sy) as proxy, openai.OpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
            _measure(client, "direct", 2)  # warm connections
            _measure(client, "watched", 2)
            direct_ttft, direct_total = _measure(client, "direct", args.requests)
            watched_ttft, watched_total = _measure(client, "watched", args.requests)
        sy.close()
    finally:
        server.stop()
    print(
        f"efficient answer: {args.words} words, first token {args.first_byte_ms:g} ms, "
        f"{args.per_token_ms:g} ms/word; judge {args.judge_ms:g} ms; {args.requests} requests each"
    )
    print(_row("direct   TTFT", direct_ttft))
    print(_row("watched  TTFT", watched_ttft))
    print(_row("direct   total", direct_total))
    print(_row("watched  total", watched_total))
    added = statistics.median(watched_ttft) - statistics.median(direct_ttft)
    print(f"escalation adds {added * 1000:.1f} ms to the median TTFT (buffered efficient turn + judge)")


if __name__ == "__main__":
    main()
