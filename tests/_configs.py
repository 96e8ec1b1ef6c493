"""Configs shared by tests (import as ``from _configs import ...``)."""

from __future__ import annotations

from typing import Any


def skeleton_config(port: int) -> dict[str, Any]:
    """The config from the walking-skeleton issue, pointed at ``port``."""
    return {
        "llm_clients": {"local": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"}},
        "targets": {
            "efficient": {
                "client": "local",
                "model": "fake-efficient",
                "price": {"input_per_mtok": 0.1, "output_per_mtok": 0.4},
                "extra_body": {"chat_template_kwargs": {"enable_thinking": False}},
            },
            "capable": {
                "client": "local",
                "model": "fake-capable",
                "price": {"input_per_mtok": 15, "output_per_mtok": 75},
            },
            "broken": {"client": "local", "model": "fail-500"},
        },
        "routes": {
            "fast": {"type": "passthrough", "target": "efficient"},
            "mix": {"type": "random", "targets": ["efficient", "capable"], "weights": [1, 1], "seed": 7},
            "resilient": {"type": "random", "targets": ["broken", "capable"], "weights": [1, 0]},
        },
    }
