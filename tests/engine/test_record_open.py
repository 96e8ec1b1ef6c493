"""What a decision record takes from its caller, bound when it is opened (engine/record_open.py):
the inbound key, a request id that cannot name another tenant's request, and a trace context
that is a trace context — each bounded, whatever the caller sends (issue 44)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from switchyard.engine.record_open import MAX_REQUEST_ID_CHARS, caller_request_id, valid_traceparent
from switchyard.protocol.access import Caller, current_caller
from switchyard.protocol.messages import Message, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse

Rig = Any
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _answer() -> ChatResponse:
    return ChatResponse(id="r", model="m", content=[TextPart(text="ok")])


async def _serve(rig: Callable[..., Rig], headers: dict[str, str], caller: Caller | None = None) -> Any:
    r = rig({"cheap": [_answer()]})
    request = ChatRequest(model="solo", messages=[Message.of("user", "hi")])

    async def run() -> None:
        current_caller.set(caller)
        await r.engine.complete(request, headers)

    # As the proxy's gate does: the caller is set in the request's own task, and nowhere else.
    await asyncio.create_task(run())
    (record,) = r.records
    return record


async def test_the_caller_is_bound_to_the_record_when_it_is_opened(rig: Callable[..., Rig]) -> None:
    record = await _serve(rig, {}, Caller("ann", "ann"))
    assert record.caller == Caller("ann", "ann")
    assert record.details["api_key"] == "ann"
    assert "_caller" not in record.to_dict() and b"_caller" not in record.to_json()
    assert current_caller.get() is None  # set only in the request's context


async def test_without_keys_a_plain_request_id_is_kept(rig: Callable[..., Rig]) -> None:
    record = await _serve(rig, {"x-switchyard-request-id": "req-42.a:b_c"})
    assert record.request_id == "req-42.a:b_c"
    assert "client_request_id" not in record.details


@pytest.mark.parametrize(
    "asked",
    ["x" * (MAX_REQUEST_ID_CHARS + 1), "x" * 16384, "two words", "-leading-dash", "ü-non-ascii", "a\r\nb", ""],
    ids=["129", "16k", "space", "dash", "unicode", "crlf", "empty"],
)
async def test_a_request_id_that_is_no_plain_token_is_replaced(rig: Callable[..., Rig], asked: str) -> None:
    record = await _serve(rig, {"x-switchyard-request-id": asked})
    assert record.request_id != asked and len(record.request_id) == 16
    assert not record.details  # not kept anywhere else either


async def test_with_keys_the_proxy_names_every_request_itself(rig: Callable[..., Rig]) -> None:
    # Key bob cannot give his request the id of one of ann's: ids are the proxy's own under keys.
    theirs = await _serve(rig, {}, Caller("ann", "ann"))
    mine = await _serve(rig, {"x-switchyard-request-id": theirs.request_id}, Caller("bob", "bob"))
    assert mine.request_id != theirs.request_id and len(mine.request_id) == 16
    assert mine.details["client_request_id"] == theirs.request_id  # the caller's own, for its logs


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (TRACEPARENT, TRACEPARENT),
        (f" {TRACEPARENT} ", TRACEPARENT),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later-fields", TRACEPARENT.replace("00-", "01-", 1)),
        (TRACEPARENT + "-more", None),  # version 00 has exactly four fields
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),
        ("00-" + "0" * 32 + "-00f067aa0ba902b7-01", None),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01", None),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", None),
        ("x" * 16384, None),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + "a" * 16384, None),
    ],
)
def test_traceparent_is_kept_only_when_it_is_one(sent: str, kept: str | None) -> None:
    assert valid_traceparent(sent) == kept


async def test_a_bad_traceparent_is_not_recorded(rig: Callable[..., Rig]) -> None:
    good = await _serve(rig, {"traceparent": TRACEPARENT})
    assert good.details["traceparent"] == TRACEPARENT
    bad = await _serve(rig, {"traceparent": "00-" + "a" * 16000})
    assert "traceparent" not in bad.details


def test_caller_request_id_bounds() -> None:
    assert caller_request_id("a" * MAX_REQUEST_ID_CHARS) == "a" * MAX_REQUEST_ID_CHARS
    assert caller_request_id("a" * (MAX_REQUEST_ID_CHARS + 1)) is None
    assert caller_request_id(None) is None
