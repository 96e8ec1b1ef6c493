"""LiteLLM as a client (``openai/<route>`` or ``anthropic/<route>``) in a bounded tool loop."""

from __future__ import annotations

import json
from typing import Any

import litellm
from _tools import TOOLS, cli, final, root

SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write content to the file at path.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a shell command and return its output.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    },
]


def main() -> None:
    args = cli(("chat", "anthropic"))
    litellm.telemetry = False
    base = args.base_url if args.api == "chat" else root(args.base_url)
    model = f"openai/{args.model}" if args.api == "chat" else f"anthropic/{args.model}"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": args.prompt},
    ]
    for _ in range(6):
        reply = litellm.completion(
            model=model,
            api_base=base,
            api_key="sk-switchyard-agent-test",
            messages=messages,
            tools=SCHEMAS,
            max_tokens=2048,
            num_retries=0,
        )
        msg = reply.choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        if not msg.tool_calls:
            final(msg.content or "")
            return
        for call in msg.tool_calls:
            output = TOOLS[call.function.name](**json.loads(call.function.arguments or "{}"))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    raise SystemExit("no final answer after 6 model turns")


if __name__ == "__main__":
    main()
