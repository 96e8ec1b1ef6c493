"""Cost of the per-request health checks: markup-leak detection and the context-window pre-check.

Pure functions, no network: ``find_marker`` on a JSON answer's text, ``MarkupScanner.feed`` per
stream delta, and ``PromptSize`` (the staged pre-call check) on the proxy benchmark's agent
request and on a 40-message request with ten tools. The held-out-backend lookup is one dict
``get`` and is not measured. See docs/reliability.md ("What the checks cost").

    .venv/bin/python benchmarks/health_checks.py
"""

from __future__ import annotations

import json
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import proxy_overhead

from switchyard.engine.markup import MarkupScanner, find_marker
from switchyard.engine.windows import PromptSize
from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.tools import ToolDefinition
from switchyard.wire import codec
from switchyard.wire.tokens import estimate_input_tokens

BODY_BYTES = json.dumps(proxy_overhead.BODY).encode()
PROSE = "The loop bound skips February 29th; the parser now handles leap years correctly. " * 50
CODE = "if a < b:\n    return x[i] <= y  # keep <tags> out\n" * 80
PLAIN_DELTAS = ["word "] * 2000
CODE_DELTAS = [*(["word "] * 1000), *(["a < b "] * 200)]


def per_call_us(fn: Callable[[], object], number: int) -> float:
    best = min(timeit.repeat(fn, number=number, repeat=5))
    return best / number * 1e6


def scan(deltas: list[str]) -> Callable[[], None]:
    def run() -> None:
        scanner = MarkupScanner()
        for delta in deltas:
            scanner.feed(delta)

    return run


def big_request() -> ChatRequest:
    msgs = [Message.of("system", "You are an agent. " * 50)]
    for i in range(13):
        msgs.append(Message.of("user", f"step {i}: " + "context " * 40))
        msgs.append(
            Message(role="assistant", content=[ToolCallPart(id=f"c{i}", name="run", arguments='{"cmd": "ls"}')])
        )
        msgs.append(
            Message(role="tool", content=[ToolResultPart(call_id=f"c{i}", content=[TextPart(text="ok " * 30)])])
        )
    props = {"x": {"type": "string", "description": "an argument"}}
    tools = [ToolDefinition(name=f"t{i}", parameters={"type": "object", "properties": props}) for i in range(10)]
    return ChatRequest(model="m", messages=msgs, tools=tools)


def main() -> None:
    agent = codec("openai_chat").decode_request(proxy_overhead.BODY)
    big = big_request()
    rows = [
        (f"find_marker, {len(PROSE)} chars of prose", per_call_us(lambda: find_marker(PROSE), 20000)),
        (f"find_marker, {len(CODE)} chars of code with '<'", per_call_us(lambda: find_marker(CODE), 2000)),
        ("MarkupScanner.feed, per delta without '<'", per_call_us(scan(PLAIN_DELTAS), 20) / len(PLAIN_DELTAS)),
        ("MarkupScanner.feed, per delta, 1 in 6 with '<'", per_call_us(scan(CODE_DELTAS), 20) / len(CODE_DELTAS)),
        (
            "PromptSize.exceeds, proxy benchmark request, fits",
            per_call_us(lambda: PromptSize(agent).exceeds(131072), 5000),
        ),
        (
            "  the same through the proxy (body size known)",
            per_call_us(lambda: PromptSize(agent, len(BODY_BYTES)).exceeds(131072), 20000),
        ),
        (
            "PromptSize.exceeds, 40 messages + 10 tools, fits",
            per_call_us(lambda: PromptSize(big).exceeds(131072), 2000),
        ),
        (
            "PromptSize.exceeds, 40 messages + 10 tools, > half window",
            per_call_us(lambda: PromptSize(big).exceeds(3000), 2000),
        ),
        ("estimate_input_tokens, 40 messages + 10 tools", per_call_us(lambda: estimate_input_tokens(big), 2000)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, us in rows:
        print(f"{name:<{width}}  {us:8.2f} µs")
    print("command: .venv/bin/python benchmarks/health_checks.py")


if __name__ == "__main__":
    main()
