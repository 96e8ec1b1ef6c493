"""A proxy over the three-format fake upstream, shared by the conformance-checklist tests.

Routes: ``via-chat`` / ``via-anthropic`` / ``via-responses`` (one per upstream format), and
``<format>-<fault>`` for every fault the tests inject (the fake upstream triggers a fault by
model name). ``via-anthropic`` is also reachable as ``claude-sonnet-4-6``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx
import openai

from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, serve_fake

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
