"""Decision time of the trajectory router at turn 100 of a 260 KB agent conversation, in-process.

Times ``await router.route(request, ctx, call)`` with the shipped checkpoint — bringing the
session's feature tally up to date, the ensemble's estimate, the switch price, the decision and
the session-state read (and, for ``+ persistent_errors``, the stage router's run rule) — on an
already-decoded request, the way the engine calls it. The conversation is a system prompt, a
task, and 100 assistant turns each with one tool call and a ~2.5 KB tool result (about 260 KB of
text). Situations: ``cold`` (first sight: every message read), ``session`` (a running loop whose
previous request, two messages shorter, was routed just before: only the new call and result are
read), ``no-session`` (the same, recognised by the conversation's opening). Every iteration's
newest tool result is new text, as in a live loop. The threshold is set above any gain so the run
never latches (a latched run skips the estimate). Budget: p99 <= 2 ms of CPU time for the
``session`` and ``no-session`` rows.

Run from the repository root::

    .venv/bin/python benchmarks/trajectory_router_latency.py [--turns 100] [--iterations 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
from typing import Any

from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo
from switchyard.protocol.targets import Price, TargetInfo
from switchyard.routers.base import BuildContext, RouteContext
from switchyard.routers.trajectory.spec import TrajectorySpec
from switchyard.state.memory import MemoryStore

BUDGET_MS = 2.0
TASK = (
    "The deploy script fails on the staging cluster since yesterday's merge. Find out why, fix it, "
    "run the test suite and tell me which commit broke it."
)


def _result(turn: int, salt: int) -> str:
    lines = [f"{turn:04d} {salt:06d} drwxr-xr-x src/module_{i}/file_{turn}_{i}.py  4096 ok" for i in range(42)]
    if turn % 7 == 0:
        lines.append("Traceback (most recent call last):\n  File 'deploy.py', line 12\nKeyError: 'REGION'")
    return "\n".join(lines)


def conversation(turns: int, salt: int = 0) -> list[Message]:
    msgs = [Message.of("system", "You are a coding agent. " * 40), Message.of("user", TASK)]
    for t in range(turns):
        call = ToolCallPart(
            id=f"c{t}", name="bash", arguments=json.dumps({"command": f"ls -la src && grep -rn REGION {t}"})
        )
        msgs.append(Message(role="assistant", content=[TextPart(text=f"Step {t}: looking further."), call]))
        msgs.append(
            Message(role="tool", content=[ToolResultPart(call_id=f"c{t}", content=[TextPart(text=_result(t, salt))])])
        )
    return msgs


def _router(rules: bool) -> Any:
    block: dict[str, Any] = {"type": "trajectory", "capable": "capable", "efficient": "efficient", "threshold": 1.0}
    if rules:
        block["persistent_errors"] = {"repeats": 1000}
    targets = {
        "capable": TargetInfo(name="capable", model="c", price=Price(input_per_mtok=3, output_per_mtok=15)),
        "efficient": TargetInfo(name="efficient", model="e", price=Price(input_per_mtok=0.1, output_per_mtok=0.4)),
    }
    return TrajectorySpec.model_validate(block).build(BuildContext(route="agent", targets=targets)), targets


async def _measure(turns: int, iterations: int, situation: str, rules: bool) -> tuple[list[float], list[float], int]:
    router, targets = _router(rules)
    store = MemoryStore()
    cpu: list[float] = []
    wall: list[float] = []
    size = 0
    for i in range(iterations):
        msgs = conversation(turns, salt=i) if situation == "cold" else None
        if msgs is None:
            base = conversation(turns - 1, salt=0)
            new_call = ToolCallPart(id=f"n{i}", name="bash", arguments=json.dumps({"command": f"make test {i}"}))
            new = [
                Message(role="assistant", content=[TextPart(text="Running the tests."), new_call]),
                Message(
                    role="tool", content=[ToolResultPart(call_id=f"n{i}", content=[TextPart(text=_result(turns, i))])]
                ),
            ]
            msgs = base + new
        request = ChatRequest(model="agent", messages=msgs)
        size = sum(
            len(m.text) + sum(len(p.text) for p in m.tool_results) + sum(len(c.arguments) for c in m.tool_calls)
            for m in msgs
        )
        session = None if situation in ("cold", "no-session") else f"s{i}"
        ctx = RouteContext(route="agent", session=SessionInfo(session_id=session), targets=targets, store=store)
        if situation != "cold":
            # the previous request of the loop: two messages shorter, routed just before
            prev = ChatRequest(model="agent", messages=msgs[:-2])
            await router.route(prev, ctx, None)
        gc.disable()
        c0, w0 = time.process_time_ns(), time.perf_counter_ns()
        decision = await router.route(request, ctx, None)
        c1, w1 = time.process_time_ns(), time.perf_counter_ns()
        gc.enable()
        assert decision.details["turn"] == turns, decision.details
        cpu.append((c1 - c0) / 1e6)
        wall.append((w1 - w0) / 1e6)
    return cpu, wall, size


def _p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args()
    ok = True
    print("| situation | conversation | CPU median ms | CPU p99 ms | wall median ms | budget |")
    print("|---|---|---|---|---|---|")
    for situation in ("cold", "session", "no-session"):
        for rules in (False, True):
            n = max(50, args.iterations // 10) if situation == "cold" else args.iterations
            cpu, wall, size = await _measure(args.turns, n, situation, rules)
            budgeted = situation != "cold"
            meets = _p(cpu, 0.99) <= BUDGET_MS
            ok = ok and (meets or not budgeted)
            label = situation + (" + persistent_errors" if rules else "")
            verdict = ("meets" if meets else "MISSES") + f" {BUDGET_MS} ms" if budgeted else "(information)"
            print(
                f"| {label} | {size / 1000:.0f} KB, {args.turns} turns | {statistics.median(cpu):.3f} | "
                f"{_p(cpu, 0.99):.3f} | {statistics.median(wall):.3f} | {verdict} |"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
