"""A proxy over the three-format fake upstream, shared by the conformance-checklist tests.

Routes: ``via-chat`` / ``via-anthropic`` / ``via-responses`` (one per upstream format), and
``<format>-<fault>`` for every fault the tests inject (the fake upstream triggers a fault by
model name). ``via-anthropic`` is also reachable as ``claude-sonnet-4-6``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx
import openai

from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, Turn, serve_fake

FORMATS = ("openai_chat", "anthropic_messages", "openai_responses")
SHORT = {"openai_chat": "chat", "anthropic_messages": "anthropic", "openai_responses": "responses"}
MODELS = {"openai_chat": "m-chat", "anthropic_messages": "m-anth", "openai_responses": "m-resp"}
FAULT_ROUTES = ("fail-400", "fail-429", "fail-500", "fail-503", "overflow-400", "error-mid", "reset-mid", "pause-mid")
API_KEY_ENV = "SWITCHYARD_TEST_ANTHROPIC_KEY"


def route(fmt: str, fault: str | None = None) -> str:
    """The route that reaches the upstream of ``fmt`` (optionally with an injected fault)."""
    return f"via-{SHORT[fmt]}" if fault is None else f"{SHORT[fmt]}-{fault}"


def config(port: int) -> dict[str, Any]:
    """The proxy's config over a fake upstream on ``port``."""
    clients = {
        "chat": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"},
        "anthropic": {
            "format": "anthropic_messages",
            "base_url": f"http://127.0.0.1:{port}",
            "api_key_env": API_KEY_ENV,
        },
        "responses": {"format": "openai_responses", "base_url": f"http://127.0.0.1:{port}/v1"},
    }
    targets: dict[str, Any] = {}
    routes: dict[str, Any] = {}
    for fmt in FORMATS:
        short = SHORT[fmt]
        targets[f"t-{short}"] = {"client": short, "model": MODELS[fmt], "context_window": 200000}
        routes[route(fmt)] = {"type": "passthrough", "target": f"t-{short}"}
        for fault in FAULT_ROUTES:
            targets[f"t-{short}-{fault}"] = {"client": short, "model": fault}
            routes[route(fmt, fault)] = {"type": "passthrough", "target": f"t-{short}-{fault}"}
    routes["via-anthropic"]["aliases"] = ["claude-sonnet-4-6"]
    return {"llm_clients": clients, "targets": targets, "routes": routes}


class Stack:
    """A running fake upstream, proxy and SDK clients."""

    def __init__(self, fake: Any, proxy: ServerThread) -> None:
        self.fake = fake
        self.proxy = proxy
        self.upstream: FakeUpstream = fake.app
        self.openai = openai.OpenAI(base_url=proxy.base_url, api_key="test", max_retries=0)
        self.anthropic = anthropic.Anthropic(base_url=proxy.root_url, api_key="test", max_retries=0)
        self.http = httpx.Client(base_url=proxy.root_url, timeout=30)

    def last(self, path: str) -> dict[str, Any]:
        """The body the fake upstream received last on an endpoint ending with ``path``."""
        return self.upstream.bodies(path=path)[-1]

    def last_headers(self, path: str) -> dict[str, str]:
        return [r for r in self.upstream.received if r.path.endswith(path)][-1].headers

    def close(self) -> None:
        self.openai.close()
        self.anthropic.close()
        self.http.close()


@contextmanager
def brain(stack: Stack, fmt: str, answer: Turn | Callable[[dict[str, Any], FakeModel], Any]) -> Iterator[None]:
    """Makes the upstream model of ``fmt`` answer for the duration: ``answer`` every time (a
    :class:`Turn`), or what the brain function ``answer(body, model)`` returns."""
    model = stack.upstream.model(MODELS[fmt])
    old = model.brain
    model.brain = answer if callable(answer) else (lambda body, m: answer)
    try:
        yield
    finally:
        model.brain = old


@contextmanager
def running(models: list[FakeModel] | None = None) -> Iterator[Stack]:
    """Starts the whole stack (the Anthropic client's API key comes from the environment)."""
    os.environ[API_KEY_ENV] = "sk-ant-test-key"
    fake = serve_fake(FakeUpstream(models or [FakeModel(m, reasoning="Let me think.") for m in MODELS.values()]))
    try:
        sy = Switchyard.from_config(config(fake.port))
        with ServerThread(sy) as proxy:
            stack = Stack(fake, proxy)
            try:
                yield stack
            finally:
                stack.close()
    finally:
        fake.stop()
        os.environ.pop(API_KEY_ENV, None)


class VllmStack(Stack):
    """A proxy over a vLLM-like fake (its own ``/health``) and a frontier fake, for items 56-58.

    Routes: ``leaky`` (reasoning markup in content, ``markup_leak: flag``), ``leaky-strict``
    (tool-call markup, ``markup_leak: fallback`` → ``frontier``), ``agent`` (``efficient`` on
    vLLM → ``frontier``), ``long`` (``small``: ``max_model_len`` 4096 read from ``/v1/models`` at
    start-up → ``frontier``) and ``long-only`` (``small`` alone).
    """

    def __init__(self, fake: Any, frontier: Any, proxy: ServerThread, records: list[Any]) -> None:
        super().__init__(fake, proxy)
        self.frontier: FakeUpstream = frontier.app
        self.records = records

    def health(self, deep: bool = False) -> dict[str, Any]:
        resp = self.http.get("/health", params={"deep": "1"} if deep else None)
        assert resp.status_code == 200
        data: dict[str, Any] = resp.json()
        return data


@contextmanager
def running_vllm() -> Iterator[VllmStack]:
    """Starts the fakes and the proxy of :class:`VllmStack`."""
    from switchyard.testing import leaky_brain

    vllm = serve_fake(
        FakeUpstream(
            [
                FakeModel("nemotron"),
                FakeModel("nemotron-noparser", brain=leaky_brain("reasoning")),
                FakeModel("nemotron-notools", brain=leaky_brain("tool_call")),
                FakeModel("nemotron-4k", context_window=4096),
            ]
        )
    )
    frontier = serve_fake(FakeUpstream([FakeModel("frontier")]))
    vllm_base = f"http://127.0.0.1:{vllm.port}/v1"
    config = {
        "llm_clients": {
            # 2 s: a probe of the local fake must not time out on a busy machine by accident.
            "vllm": {"base_url": vllm_base, "max_retries": 0, "health_check": {"timeout_s": 30.0}},
            "vllm_strict": {"base_url": vllm_base, "max_retries": 0, "markup_leak": "fallback"},
            "frontier": {"base_url": f"http://127.0.0.1:{frontier.port}/v1", "max_retries": 0},
        },
        "targets": {
            "efficient": {"client": "vllm", "model": "nemotron"},
            "leaky": {"client": "vllm", "model": "nemotron-noparser"},
            "leaky_strict": {"client": "vllm_strict", "model": "nemotron-notools"},
            "small": {"client": "vllm", "model": "nemotron-4k", "probe_context_window": True},
            "frontier": {"client": "frontier", "model": "frontier", "context_window": 200000},
        },
        "routes": {
            "leaky": {"type": "passthrough", "target": "leaky"},
            "leaky-strict": {"type": "passthrough", "target": "leaky_strict", "fallbacks": ["frontier"]},
            "agent": {"type": "passthrough", "target": "efficient", "fallbacks": ["frontier"]},
            "long": {"type": "passthrough", "target": "small", "fallbacks": ["frontier"]},
            "long-only": {"type": "passthrough", "target": "small"},
        },
        # The item-57 checks probe on every deep check; callers without an admin key are rate-bounded.
        "server": {"deep_health_interval_s": 0},
    }
    records: list[Any] = []
    sy = Switchyard.from_config(config)
    sy.on_decision(records.append)
    try:
        with ServerThread(sy) as proxy:
            stack = VllmStack(vllm, frontier, proxy, records)
            try:
                yield stack
            finally:
                stack.close()
    finally:
        sy.close()
        vllm.stop()
        frontier.stop()
