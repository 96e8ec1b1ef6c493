"""What shared session state and metrics cost per request: Redis vs memory, and Metrics.observe.

Starts its own redis-server on a free port (the binary must be on PATH), then times the state
operations an escalation turn makes (one ``get`` and one atomic ``update``) against
:class:`~switchyard.state.memory.MemoryStore` and :class:`~switchyard.state.redis_store.RedisStore`
on 127.0.0.1, sequentially and with many sessions at once, plus the cost of turning one decision
record into Prometheus samples and into the USD totals.

It also compares the two ways a request that changes nothing (a kept affinity assignment, a
latched escalation turn) can keep its session alive after reading it: ``update`` with an
identity function (what those paths did before) and ``touch``, with the Redis commands each
sends per request (``INFO commandstats`` of the benchmark's own server).

Run:  PYTHONPATH=$PWD python benchmarks/state_backend.py [--turns 5000]
Numbers in docs/deployment.md (sizing) came from this command.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from typing import Any

from switchyard.engine.accounting import Pricing, RouteTiers, UsdLedger
from switchyard.engine.records import Attempt, DecisionRecord
from switchyard.protocol.session import StateStore
from switchyard.protocol.targets import Price
from switchyard.server.metrics import Metrics
from switchyard.state.memory import MemoryStore
from switchyard.state.redis_store import RedisStore


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bump(current: dict[str, Any] | None) -> dict[str, Any]:
    state = dict(current or {"streak": 0, "latched": False, "judged_turns": 0})
    state["streak"] += 1
    state["judged_turns"] += 1
    return state


async def _turn(store: StateStore, key: str) -> float:
    t0 = time.perf_counter()
    await store.get(key)
    await store.update(key, _bump)
    return (time.perf_counter() - t0) * 1e6


async def _sequential(store: StateStore, turns: int) -> list[float]:
    return [await _turn(store, f"agent:s{n % 100}:escalation") for n in range(turns)]


async def _concurrent(store: StateStore, turns: int, width: int) -> float:
    """Turns per second with ``width`` sessions in flight at once."""
    t0 = time.perf_counter()
    for start in range(0, turns, width):
        await asyncio.gather(*(_turn(store, f"agent:c{n}:escalation") for n in range(start, start + width)))
    return turns / (time.perf_counter() - t0)


def _keep(current: dict[str, Any] | None) -> dict[str, Any] | None:
    return current


async def _kept_by_update(store: StateStore, key: str) -> None:
    await store.get(key)
    await store.update(key, _keep)


async def _kept_by_touch(store: StateStore, key: str) -> None:
    await store.get(key)
    await store.touch(key)


async def _refresh(url: str, turns: int) -> None:
    """A kept turn's state cost: ``get`` + identity ``update`` against ``get`` + ``touch``."""
    import redis

    counter = redis.Redis.from_url(url, decode_responses=True)
    ways = (("get+update", _kept_by_update), ("get+touch", _kept_by_touch))
    for name, store in (("memory", MemoryStore()), ("redis (127.0.0.1)", RedisStore(url, timeout_s=1.0))):
        for n in range(100):
            await store.set(f"agent:k{n}:affinity", {"target": "efficient", "source": "llm-classifier", "turn": 0})
        for label, kept in ways:
            for n in range(200):  # warm-up
                await kept(store, f"agent:k{n % 100}:affinity")
            counter.config_resetstat()
            samples = []
            for n in range(turns):
                t0 = time.perf_counter()
                await kept(store, f"agent:k{n % 100}:affinity")
                samples.append((time.perf_counter() - t0) * 1e6)
            print(_row(f"kept: {label}, {name}", samples))
            if isinstance(store, RedisStore):
                stats = counter.info("commandstats")
                calls = {
                    k.removeprefix("cmdstat_"): int(v["calls"])
                    for k, v in stats.items()
                    if k not in ("cmdstat_info", "cmdstat_config|resetstat")
                }
                per_turn = ", ".join(f"{k.upper()} {v / turns:g}" for k, v in sorted(calls.items()))
                print(f"{'':34} Redis commands per turn: {sum(calls.values()) / turns:g} ({per_turn})")
        closer = getattr(store, "aclose", None)
        if closer is not None:
            await closer()
    counter.close()


def _row(name: str, samples: list[float]) -> str:
    samples = sorted(samples)
    p99 = samples[int(len(samples) * 0.99) - 1]
    return f"{name:34} p50 {statistics.median(samples):8.1f} us   p99 {p99:8.1f} us"


async def _stores(url: str, turns: int) -> None:
    for name, store in (("memory", MemoryStore()), ("redis (127.0.0.1)", RedisStore(url, timeout_s=1.0))):
        await _sequential(store, 200)  # warm-up: connections, code paths
        print(_row(f"get + update, {name}", await _sequential(store, turns)))
        rate = await _concurrent(store, turns, 50)
        print(f"{'':34} {rate:8.0f} turns/s with 50 sessions in flight")
        closer = getattr(store, "aclose", None)
        if closer is not None:
            await closer()


def _metrics(records: int) -> None:
    metrics = Metrics()
    record = DecisionRecord(request_id="1", route="agent", router="stage_router", source="hold", selected="capable")
    record.tier, record.input_tokens, record.output_tokens, record.cost_usd = "capable", 1200, 300, 0.04
    record.baseline_cost_usd = 0.04
    record.attempts = [Attempt("capable", ok=True, elapsed_ms=800.0)]
    for _ in range(200):
        metrics.observe(record)
    samples = []
    for _ in range(records):
        t0 = time.perf_counter()
        metrics.observe(record)
        samples.append((time.perf_counter() - t0) * 1e6)
    print(_row("Metrics.observe (one record)", samples))
    pricing = Pricing(tiers={"agent": RouteTiers("capable", "efficient")}, prices={"capable": Price(input_per_mtok=15)})
    ledger = UsdLedger()
    samples = []
    for n in range(records):
        record.session_id = f"s{n % 1000}"
        t0 = time.perf_counter()
        pricing(record)
        ledger(record)
        samples.append((time.perf_counter() - t0) * 1e6)
    print(_row("Pricing + UsdLedger (one record)", samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=5000)
    args = parser.parse_args()
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on PATH (apt-get install -y redis-server)")
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            print(f"redis-server {subprocess.check_output([binary, '--version'], text=True).split()[2]}")
            asyncio.run(_stores(f"redis://127.0.0.1:{port}/0", args.turns))
            asyncio.run(_refresh(f"redis://127.0.0.1:{port}/0", args.turns))
            _metrics(args.turns)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
