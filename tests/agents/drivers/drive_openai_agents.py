"""OpenAI Agents SDK: an Agent with two function tools, on Chat Completions or Responses."""

from __future__ import annotations

from _tools import cli, final, shell, write_file
from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI


def main() -> None:
    args = cli(("chat", "responses"))
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=args.base_url, api_key="sk-switchyard-agent-test", max_retries=0)
    model = (
        OpenAIChatCompletionsModel(model=args.model, openai_client=client)
        if args.api == "chat"
        else OpenAIResponsesModel(model=args.model, openai_client=client)
    )
    agent = Agent(
        name="coder",
        instructions="You are a coding agent. Use the tools.",
        model=model,
        tools=[function_tool(write_file), function_tool(shell)],
    )
    result = Runner.run_sync(agent, args.prompt, max_turns=6)
    final(str(result.final_output))


if __name__ == "__main__":
    main()
