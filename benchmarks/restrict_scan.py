"""What a route's ``restrict:`` rules cost per request: the detectors over a whole conversation.

Every request of a route with ``restrict:`` rules is searched in full (system prompt, messages,
tool calls and results), because agents resend the whole conversation each turn. This measures
the median time of one scan for conversations of increasing size, built from code-like text that
contains the detectors' literal triggers (``sk-``, ``key``, ``password``, ``access`` …) but no
secret, so every expression actually runs: the expensive case for text without secrets.

Usage::

    python benchmarks/restrict_scan.py [--sizes 10000,100000,1000000,5000000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from switchyard.engine.restriction import restriction_for
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.restrict import RestrictPolicy, RestrictRule
from switchyard.wire.openai_chat.request import decode_request

LINE = "    key = d['api_key'] if task-12 else access(auth, password)  # contact: see the docs\n"


def conversation(chars: int) -> dict[str, Any]:
    """A Chat Completions body of about ``chars`` characters of messages, 4 KB each."""
    block = LINE * (4096 // len(LINE))
    count = max(1, chars // len(block))
    return {
        "model": "r",
        "messages": [{"role": "user" if i % 2 else "assistant", "content": block} for i in range(count)],
    }


def agent_body() -> dict[str, Any]:
    """An agent's turn: 20 tools with nested schemas, 40 messages of code and tool output."""
    schema = {
        "type": "object",
        "properties": {
            f"arg{j}": {"type": "string", "description": f"The {j}th argument: a path, a pattern or a command."}
            for j in range(8)
        },
        "required": ["arg0"],
    }
    tools = [
        {"type": "function", "function": {"name": f"tool{i}", "description": LINE * 3, "parameters": schema}}
        for i in range(20)
    ]
    messages = [{"role": "user" if i % 2 else "assistant", "content": LINE * 20} for i in range(40)]
    return {"model": "r", "messages": messages, "tools": tools}


def median_ms(policy: RestrictPolicy, request: ChatRequest, rounds: int, body: dict[str, Any] | None = None) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        policy.matches(request, body)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def no_rule_us(rounds: int = 20_000) -> float:
    """Microseconds ``restriction_for`` takes on a route without rules, no header and no key."""
    request = decode_request(agent_body())
    infos = {"a": TargetInfo(name="a", model="m", format="openai_chat")}
    started = time.perf_counter()
    for _ in range(rounds):
        restriction_for(request, {}, None, infos, ("a",))
    return (time.perf_counter() - started) / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000,5000000")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    policies = {
        "secrets": RestrictPolicy([RestrictRule(detector="secrets", require=["onprem"])]),
        "emails": RestrictPolicy([RestrictRule(detector="emails", require=["onprem"])]),
        "pattern": RestrictPolicy([RestrictRule(pattern=r"INC-\d{6}", require=["onprem"])]),
    }
    secrets = policies["secrets"]
    print(f"{'chars':>10} " + " ".join(f"{name + ' ms':>12}" for name in policies) + f" {'secrets + body ms':>18}")
    for size in (int(s) for s in args.sizes.split(",")):
        body = conversation(size)
        request = decode_request(body)  # as the proxy decodes it: the IR shares the body's strings
        chars = sum(len(m.text) for m in request.messages)
        row = [median_ms(policy, request, args.rounds) for policy in policies.values()]
        with_body = median_ms(secrets, request, args.rounds, body)
        print(f"{chars:>10} " + " ".join(f"{ms:>12.2f}" for ms in row) + f" {with_body:>18.2f}")
    body = agent_body()
    request = decode_request(body)
    alone, both = median_ms(secrets, request, args.rounds), median_ms(secrets, request, args.rounds, body)
    kb = len(str(body)) // 1000
    print(f"agent request (20 tools, 40 messages, {kb} KB): secrets {alone:.2f} ms, + body {both:.2f} ms")
    print(f"route without rules (no header, no key): {no_rule_us():.2f} µs per request")


if __name__ == "__main__":
    main()
