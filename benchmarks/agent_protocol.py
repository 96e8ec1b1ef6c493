"""Per-request cost of the issue-12 protocol additions, on recorded agent requests.

Pure functions, no network: decoding each recorded request of ``tests/fixtures/agents/`` (the
decoder now also reads mid-conversation system entries and tool keys), deriving a session key
for a caller that sent none (``session.derive``), and clamping an output cap
(``switchyard.clients.limits``): the check every request pays (``may_clamp``), a 65,536 cap
beside the body-size bound (what the backend does), and the same cap with the prompt estimate
(no size known). See docs/translation.md.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/agent_protocol.py
"""

from __future__ import annotations

import json
import timeit
from pathlib import Path
from typing import Any

import orjson

from switchyard.clients.limits import clamp_output, may_clamp
from switchyard.engine.session import identify
from switchyard.protocol.targets import TargetInfo
from switchyard.wire import codec, diagnostics
from switchyard.wire.base import WireFormat

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "agents"
FORMATS = {"/v1/messages": WireFormat.ANTHROPIC_MESSAGES, "/v1/responses": WireFormat.OPENAI_RESPONSES}


def _us(fn: Any, number: int = 2000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


BIG = TargetInfo(name="t", model="m", context_window=131072, max_output_tokens=32768)
"""A cap of 65,536 against this target is clamped, with the prompt estimate (cap > window / 8)."""
SMALL_CAP = TargetInfo(name="t", model="m", context_window=131072)
"""A cap of 4,096 against this target is never clamped (``may_clamp`` says so)."""


def _row(name: str, fmt: WireFormat, body: dict[str, Any]) -> str:
    decode = codec(fmt).decode_request
    request = decode(body)
    size = len(orjson.dumps(body))
    cells = [
        _us(lambda: decode(body), 200),
        _us(lambda: identify({}, request, derive=True)),
        _us(lambda: identify({}, request)),
        _us(lambda: may_clamp({"max_tokens": 4096}, SMALL_CAP)),
        _us(lambda: clamp_output({"max_tokens": 65536}, request, BIG, size)),
        _us(lambda: clamp_output({"max_tokens": 65536}, request, BIG)),
    ]
    return f"{name:40}" + "".join(f" {c:9.2f}" for c in cells)


def main() -> None:
    """Prints microseconds per call for each recorded request."""
    heads = ("decode", "derive", "identify", "may_clamp", "bounded", "estimate")
    print(f"{'fixture (us per call)':40}" + "".join(f" {h:>9}" for h in heads))
    for path in sorted(FIXTURES.glob("*.json")):
        data = json.loads(path.read_text())
        print(_row(path.name, FORMATS.get(data["path"], WireFormat.OPENAI_CHAT), data["body"]))
        diagnostics.reset()


if __name__ == "__main__":
    main()
