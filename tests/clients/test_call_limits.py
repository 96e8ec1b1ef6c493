"""One attempt's limits are worked out in one place (``Timeouts.for_call``) for every backend:
the HTTP backend, the System One client and the LiteLLM adapter name the same limit the same way
when it passes, and mark the caller's own deadline as the caller's (issue 48 review)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from switchyard.clients.http_parts import Timeouts
from switchyard.clients.litellm_backend import LiteLLMBackend
from switchyard.clients.system_one import SystemOneBackend
from switchyard.protocol.call import CallOptions
from switchyard.protocol.decision import ChoiceQuestion
from switchyard.protocol.errors import UpstreamTimeoutError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo


def test_for_call_caps_the_total_by_the_request_deadline_and_says_which() -> None:
    limits = Timeouts(connect=5, read=60, total=30)
    merged, deadline, label = limits.for_call(CallOptions(timeout={"total": 2, "read": 90}))
    assert (merged.read, merged.total, label) == (60, 2, "total of 2s")
    assert deadline is not None and 0 < deadline - time.monotonic() <= 2
    soon = time.monotonic() + 1
    assert limits.for_call(CallOptions(deadline=soon))[1:] == (soon, "request deadline")
    assert Timeouts(total=None).for_call(CallOptions())[1:] == (None, "total")


async def _never(*_: Any, **__: Any) -> Any:
    await asyncio.Event().wait()  # an upstream that never answers: only the limit ends the call


async def test_system_one_names_the_total_it_ran_out_of() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return await _never()

    client = SystemOneBackend("ts", "http://decisions.test/v1", transport=httpx.MockTransport(handler))
    target = TargetInfo(name="jev", model="jev-latest", client="ts", format="system_one")
    question = ChoiceQuestion(instructions="Who fits?", options={"easy": "typo", "hard": "race"})
    request = ChatRequest(messages=[Message.of("user", "x")], choice=question)
    with pytest.raises(UpstreamTimeoutError, match=r"no decision within its total of 0\.01s") as caught:
        await client.complete(request, target, CallOptions(timeout={"total": 0.01}))
    assert caught.value.caller_limit is False
    await client.aclose()


class _FakeLiteLLM:
    acompletion = staticmethod(_never)


@pytest.mark.parametrize("stream", [False, True])
async def test_litellm_names_its_limit_like_the_http_backend(stream: bool) -> None:
    backend = LiteLLMBackend("lite", timeouts=Timeouts(total=0.01), module=_FakeLiteLLM())
    target = TargetInfo(name="lite-target", model="openai/gpt-x", client="lite", format="openai_chat")
    request = ChatRequest(messages=[Message.of("user", "x")])
    call = backend.open_stream if stream else backend.complete
    what = "no stream" if stream else "no complete answer"
    with pytest.raises(UpstreamTimeoutError, match=rf"{what} within its total of 0\.01s") as caught:
        await call(request, target, CallOptions())
    assert caught.value.caller_limit is False
    mine = CallOptions(deadline=time.monotonic() + 0.01)
    with pytest.raises(UpstreamTimeoutError, match=rf"{what} within its request deadline") as caught:
        await call(request, target, mine)
    assert caught.value.caller_limit is True


async def test_a_token_count_is_bounded_like_any_call_the_request_deadline_included() -> None:
    from switchyard.clients.backend import HttpBackend

    async def handler(request: httpx.Request) -> httpx.Response:
        return await _never()

    backend = HttpBackend(
        "anth",
        "http://anthropic.test",
        "anthropic_messages",
        timeouts=Timeouts(total=0.01),
        transport=httpx.MockTransport(handler),
    )
    target = TargetInfo(name="claude", model="claude-x", client="anth", format="anthropic_messages")
    request = ChatRequest(messages=[Message.of("user", "count me")])
    with pytest.raises(UpstreamTimeoutError, match=r"no token count within its total of 0\.01s") as caught:
        await backend.count_tokens(request, target, CallOptions())
    assert caught.value.caller_limit is False
    with pytest.raises(UpstreamTimeoutError, match="no token count within its request deadline") as caught:
        await backend.count_tokens(request, target, CallOptions(deadline=time.monotonic()))
    assert caught.value.caller_limit is True
    await backend.aclose()
