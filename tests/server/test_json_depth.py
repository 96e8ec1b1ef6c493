"""JSON nesting is checked once, at decode (issue 44): orjson parses 1,024 levels but writes only
254, so a body nested 255 to 1,024 deep used to pass the parser and fail on its way upstream as
``500 internal error: TypeError``, with no record. Now every endpoint that reads a body answers
400 naming the limit, and a body at the limit is served."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.wire.json import MAX_DEPTH, too_deep


@pytest.fixture(scope="module")
def proxy(module_config: dict[str, Any]) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    sy = Switchyard.from_config(module_config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    with ServerThread(sy) as server:
        yield server, records
    sy.close()


def _nested(depth: int) -> Any:
    """An object ``depth`` levels deep (``{"a": {"a": ... 1}}``)."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def _skeleton(path: str) -> dict[str, Any]:
    """A request of ``path``'s API with a tool whose schema holds ``DEEP`` where more nesting goes."""
    schema = {"type": "object", "properties": {"x": "DEEP"}}
    if path.startswith("/v1/messages"):
        return {
            "model": "fast",
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "f", "input_schema": schema}],
        }
    if path == "/v1/responses":
        return {"model": "fast", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": schema}]}
    return {
        "model": "fast",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}],
    }


def _body(path: str, levels: int) -> bytes:
    """``path``'s request nesting exactly ``levels`` deep, written by hand: no JSON encoder
    writes more than a few hundred levels."""
    skeleton = _skeleton(path)
    around = _depth(orjson.loads(orjson.dumps(skeleton).replace(b'"DEEP"', b"{}"))) - 1
    deep = b'{"a":' * (levels - around) + b"1" + b"}" * (levels - around)
    return orjson.dumps(skeleton).replace(b'"DEEP"', deep)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/decision"])
@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 300, 1000])
def test_a_body_nested_past_the_limit_is_a_400_naming_it(
    proxy: tuple[ServerThread, list[DecisionRecord]], path: str, levels: int
) -> None:
    server, _ = proxy
    body = _body(path, levels)
    if levels < 900:  # Python's own recursion limit stops the check short of it
        assert _depth(orjson.loads(body)) == levels
    resp = httpx.post(server.root_url + path, content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert f"more than {MAX_DEPTH} levels deep" in resp.text


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_a_body_at_the_limit_is_served(proxy: tuple[ServerThread, list[DecisionRecord]], path: str) -> None:
    server, records = proxy
    body = _body(path, MAX_DEPTH)
    assert _depth(orjson.loads(body)) == MAX_DEPTH
    before = len(records)
    resp = httpx.post(server.root_url + path, content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text
    assert len(records) == before + 1 and records[-1].status == 200


def test_count_tokens_checks_the_depth_too(proxy: tuple[ServerThread, list[DecisionRecord]]) -> None:
    server, _ = proxy
    body = _body("/v1/messages/count_tokens", 400)
    resp = httpx.post(
        server.root_url + "/v1/messages/count_tokens", content=body, headers={"content-type": "application/json"}
    )
    assert resp.status_code == 400 and f"more than {MAX_DEPTH} levels deep" in resp.text


def test_the_probe_counts_objects_and_arrays_alike() -> None:
    assert not too_deep(_nested(MAX_DEPTH)) and too_deep(_nested(MAX_DEPTH + 1))
    arrays: Any = 1
    for _ in range(MAX_DEPTH):
        arrays = [arrays]
    assert not too_deep(arrays) and too_deep([arrays]) and not too_deep({}) and not too_deep("x")


def test_the_shortest_body_past_the_limit_is_caught() -> None:
    from switchyard.protocol.errors import InvalidRequestError
    from switchyard.wire.json import load_object

    at_limit = b'{"a":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}"
    assert isinstance(load_object(at_limit)["a"], list)
    past = b'{"a":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}"
    with pytest.raises(InvalidRequestError, match=f"more than {MAX_DEPTH} levels deep"):
        load_object(past)
