"""smolagents ToolCallingAgent on an OpenAI-compatible server (it ends with its final_answer tool)."""

from __future__ import annotations

from _tools import cli, final, shell, write_file
from smolagents import OpenAIServerModel, ToolCallingAgent, tool


def main() -> None:
    args = cli(("chat",))
    model = OpenAIServerModel(model_id=args.model, api_base=args.base_url, api_key="sk-switchyard-agent-test")
    agent = ToolCallingAgent(tools=[tool(write_file), tool(shell)], model=model, max_steps=6, verbosity_level=0)
    final(str(agent.run(args.prompt)))


if __name__ == "__main__":
    main()
