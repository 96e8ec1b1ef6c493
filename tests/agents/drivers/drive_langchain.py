"""LangChain chat models (ChatOpenAI on Chat or Responses, ChatAnthropic) in a bounded tool loop."""

from __future__ import annotations

from typing import Any

from _tools import TOOLS, cli, final, root
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool


def model_for(api: str, base_url: str, name: str) -> Any:
    if api == "anthropic":
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(
            model=name, base_url=root(base_url), api_key="sk-switchyard-agent-test", max_retries=0, max_tokens=2048
        )
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=name,
        base_url=base_url,
        api_key="sk-switchyard-agent-test",
        max_retries=0,
        use_responses_api=api == "responses",
        streaming=True,
    )


def main() -> None:
    args = cli(("chat", "responses", "anthropic"))
    tools = {name: tool(fn) for name, fn in TOOLS.items()}
    llm = model_for(args.api, args.base_url, args.model).bind_tools(list(tools.values()))
    messages: list[Any] = [SystemMessage("You are a coding agent. Use the tools."), HumanMessage(args.prompt)]
    for _ in range(6):
        reply = llm.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            final(reply.text if isinstance(reply.text, str) else reply.text())
            return
        for call in reply.tool_calls:
            output = tools[call["name"]].invoke(call["args"])
            messages.append(ToolMessage(content=str(output), tool_call_id=call["id"]))
    raise SystemExit("no final answer after 6 model turns")


if __name__ == "__main__":
    main()
