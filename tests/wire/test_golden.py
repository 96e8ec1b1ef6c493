"""Golden fixtures per wire format: decode hand-written provider payloads, re-encode them for
every format, and compare with the reviewed expectations stored beside them.

Inputs (``*.request.json``, ``*.response.json``, ``*.stream.sse``) are written in the shape the
providers document and send. Expectations (``*.ir.json``, ``*.to_<format>.json``,
``*.as_<format>.json|.sse``) record the translation and the diagnostics it reported; after a
deliberate change, regenerate them with ``SWITCHYARD_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from switchyard.protocol.stream import StreamAccumulator
from switchyard.testing import streams
from switchyard.wire import SSEParser, codec, diagnostics, ids
from switchyard.wire.base import WireFormat

GOLDEN = Path(__file__).parent / "golden"
FORMATS = [f.value for f in WireFormat]
UPDATE = os.environ.get("SWITCHYARD_UPDATE_GOLDEN") == "1"


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = itertools.count(1)
    monkeypatch.setattr(ids, "_hex", lambda: f"{next(counter):024d}")
    monkeypatch.setattr("time.time", lambda: 1767225600.0)
    diagnostics.reset()


def _cases(suffix: str) -> list[tuple[str, Path]]:
    return [(p.parent.name, p) for p in sorted(GOLDEN.glob(f"*/*{suffix}"))]


def _check(path: Path, actual: Any) -> None:
    text = (
        actual if isinstance(actual, str) else json.dumps(actual, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    )
    if UPDATE:
        path.write_text(text)
        return
    assert path.exists(), f"missing golden {path.name}; run with SWITCHYARD_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{path.name} differs from the reviewed golden"


def _with_diagnostics(value: Any) -> dict[str, Any]:
    found = sorted(diagnostics.counts())
    diagnostics.reset()
    return {"diagnostics": found, "value": value}


@pytest.mark.parametrize(("fmt", "path"), _cases(".request.json"), ids=lambda v: getattr(v, "name", v))
def test_request_goldens(fmt: str, path: Path) -> None:
    body = json.loads(path.read_text())
    request = codec(fmt).decode_request(body)
    stem = path.name.removesuffix(".request.json")
    _check(path.with_name(f"{stem}.ir.json"), _with_diagnostics(request.model_dump(mode="json", exclude_none=True)))
    for target in FORMATS:
        encoded = codec(target).encode_request(request, model="upstream-model", stream=request.stream)
        _check(path.with_name(f"{stem}.to_{target}.json"), _with_diagnostics(encoded))


@pytest.mark.parametrize(("fmt", "path"), _cases(".response.json"), ids=lambda v: getattr(v, "name", v))
def test_response_goldens(fmt: str, path: Path) -> None:
    response = codec(fmt).decode_response(json.loads(path.read_text()))
    stem = path.name.removesuffix(".response.json")
    _check(path.with_name(f"{stem}.ir.json"), _with_diagnostics(response.model_dump(mode="json", exclude_none=True)))
    for caller in FORMATS:
        encoded = codec(caller).encode_response(response, model="route-model")
        _check(path.with_name(f"{stem}.as_{caller}.json"), _with_diagnostics(encoded))


@pytest.mark.parametrize(("fmt", "path"), _cases(".stream.sse"), ids=lambda v: getattr(v, "name", v))
def test_stream_goldens(fmt: str, path: Path) -> None:
    parser = SSEParser()
    decoder = codec(fmt).stream_decoder()
    events = []
    raw = path.read_bytes()
    for i in range(0, len(raw), 7):  # odd-sized chunks, splitting lines and UTF-8 characters
        for sse in parser.feed(raw[i : i + 7]):
            events.extend(decoder.feed(sse))
    for sse in parser.finish():
        events.extend(decoder.feed(sse))
    events.extend(decoder.finish())
    stem = path.name.removesuffix(".sse")
    _check(path.with_name(f"{stem}.events.json"), [e.model_dump(mode="json", exclude_none=True) for e in events])
    acc = StreamAccumulator()
    for e in events:
        acc.add(e)
    _check(path.with_name(f"{stem}.ir.json"), acc.response().model_dump(mode="json", exclude_none=True))
    for caller in FORMATS:
        encoder = codec(caller).stream_encoder(model="route-model", include_usage=True)
        out = b"".join(encoder.encode(e) for e in events) + encoder.finish()
        parsed = streams.parse(out)
        if caller == "openai_chat":
            streams.check_chat(parsed, include_usage=True)
        elif caller == "anthropic_messages":
            streams.check_anthropic(parsed)
        else:
            streams.check_responses(parsed)
        _check(path.with_name(f"{stem}.as_{caller}.sse"), out.decode())
