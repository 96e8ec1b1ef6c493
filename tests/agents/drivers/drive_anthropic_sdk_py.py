"""The Anthropic Python SDK's tool runner (``client.beta.messages.tool_runner``) in a tool loop.

The runner threads its turns by default (beta ``message-threads-2026-08-12``): after the first
turn it sends only the tool results with ``thread: {type: "continue"}`` (docs/agents.md).
``--api anthropic`` (JSON) or ``--api anthropic-stream`` (``stream=True``).
"""

from __future__ import annotations

import anthropic
from _tools import cli, final, root, shell, write_file
from anthropic import beta_tool


def main() -> None:
    args = cli(("anthropic", "anthropic-stream"))
    stream = args.api == "anthropic-stream"
    tools = [beta_tool(write_file), beta_tool(shell)]
    with anthropic.Anthropic(base_url=root(args.base_url), api_key="sk-switchyard-agent-test", max_retries=0) as client:
        runner = client.beta.messages.tool_runner(
            model=args.model,
            max_tokens=2048,
            system="You are a coding agent. Use the tools.",
            messages=[{"role": "user", "content": args.prompt}],
            tools=tools,
            max_iterations=6,
            stream=stream,
        )
        text = ""
        if stream:
            for message_stream in runner:
                message = message_stream.get_final_message()
                text = "".join(b.text for b in message.content if b.type == "text") or text
        else:
            for message in runner:
                text = "".join(b.text for b in message.content if b.type == "text") or text
    final(text)


if __name__ == "__main__":
    main()
