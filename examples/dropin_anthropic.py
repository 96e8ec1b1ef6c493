"""The real anthropic SDK, routed in-process to a Chat Completions model (no server, no port).

Runs offline: a simulated vLLM-style model server is started on 127.0.0.1 first.

    .venv/bin/python examples/dropin_anthropic.py
"""

from __future__ import annotations

import switchyard
from switchyard.testing import FakeModel, FakeUpstream, serve_fake

TOOLS = [
    {
        "name": "lookup",
        "description": "Look something up.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]


def main() -> None:
    upstream = serve_fake(FakeUpstream([FakeModel("lightning", reasoning="The user wants a lookup.")]))
    config = {
        "llm_clients": {"vllm": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{upstream.port}/v1"}},
        "targets": {"efficient": {"client": "vllm", "model": "lightning"}},
        "routes": {"agent": {"type": "passthrough", "target": "efficient"}},
    }
    client = switchyard.Anthropic(config=config)
    try:
        messages = [{"role": "user", "content": "please use a tool to find the cat"}]
        with client.messages.stream(model="agent", max_tokens=1024, messages=messages, tools=TOOLS) as stream:
            first = stream.get_final_message()
        for block in first.content:
            print(block.type, getattr(block, "thinking", "") or getattr(block, "input", ""))
        call = next(b for b in first.content if b.type == "tool_use")
        messages += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "on the mat"}]},
        ]
        final = client.messages.create(model="agent", max_tokens=1024, messages=messages, tools=TOOLS)
        print("answer:", "".join(b.text for b in final.content if b.type == "text"))
        print("tokens:", client.messages.count_tokens(model="agent", messages=messages, tools=TOOLS).input_tokens)
    finally:
        client.close()
        client.switchyard.close()
        upstream.stop()


if __name__ == "__main__":
    main()
