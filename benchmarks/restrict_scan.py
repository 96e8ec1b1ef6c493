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

from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.routers.restrict import RestrictPolicy, RestrictRule

LINE = "    key = d['api_key'] if task-12 else access(auth, password)  # contact: see the docs\n"


def conversation(chars: int) -> ChatRequest:
    """About ``chars`` characters of messages, 4 KB each."""
    block = LINE * (4096 // len(LINE))
    messages = [Message.of("user" if i % 2 else "assistant", block) for i in range(max(1, chars // len(block)))]
    return ChatRequest(model="r", messages=messages)


def median_ms(policy: RestrictPolicy, request: ChatRequest, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        policy.matches(request)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


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
    print(f"{'chars':>10} " + " ".join(f"{name + ' ms':>12}" for name in policies))
    for size in (int(s) for s in args.sizes.split(",")):
        request = conversation(size)
        chars = sum(len(m.text) for m in request.messages)
        row = [median_ms(policy, request, args.rounds) for policy in policies.values()]
        print(f"{chars:>10} " + " ".join(f"{ms:>12.2f}" for ms in row))


if __name__ == "__main__":
    main()
