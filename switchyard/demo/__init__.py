"""``switchyard demo``: a routed, tool-using agent session on simulated models.

Layer: top level (beside ``cli``): uses the drop-in client, the proxy and the fake upstream.

Everything runs on 127.0.0.1 with no keys and no GPU: two simulated OpenAI-compatible model
servers, a router over them, and a scripted coding agent that reads, tests and edits a tiny
repository until its tests pass. Each scenario below is one agent session through one route.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.demo.agent import STAGE_TASKS, TASKS, TOOLS, Repo, advisor_model, judge_model, models, parse_args
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.response import Usage

CONFIG_TEMPLATE = """\
# The demo's router config. Ports are filled in when the simulated servers start.
llm_clients:
  lightning-sim: {{format: openai_chat, base_url: "http://127.0.0.1:{efficient_port}/v1"}}
  frontier-sim:  {{format: openai_chat, base_url: "http://127.0.0.1:{frontier_port}/v1"}}
targets:
  efficient:
    client: lightning-sim
    model: nemotron-lightning-sim
    price: {{input_per_mtok: 0.10, output_per_mtok: 0.40}}
    extra_body: {{chat_template_kwargs: {{enable_thinking: false}}}}
  frontier:
    client: frontier-sim
    model: frontier-sim
    price: {{input_per_mtok: 15.0, output_per_mtok: 75.0}}
  judge:
    client: lightning-sim
    model: judge-sim
    price: {{input_per_mtok: 0.10, output_per_mtok: 0.40}}
  advisor:
    client: frontier-sim
    model: advisor-sim
    price: {{input_per_mtok: 15.0, output_per_mtok: 75.0}}
routes:
  mix:
    type: random
    targets: [efficient, frontier]
    weights: [3, 1]
    seed: 7
    description: three in four calls to the efficient model, the rest to the frontier model
  classify:
    type: llm_classifier
    mode: capability
    classifier_target: judge
    strong_target: frontier
    weak_target: efficient
    base_threshold: 0.6
    classify_trigger: user_turn
    description: a judge forecasts at each user turn whether the efficient model can do the task
  watch:
    type: llm_classifier
    mode: escalation
    classifier_target: judge
    strong_target: frontier
    weak_target: efficient
    confirmations: 2
    description: efficient first; a judge reviews every turn and latches to frontier on trouble
  stage:
    type: stage_router
    capable: frontier
    efficient: efficient
    picker: efficient_first
    confidence_threshold: 0.5
    hold_turns: {{capable: 2}}
    tool_semantics: {{edit_file: edit}}
    handoff_notes:
      escalation_note: "[router] A cheaper model was stuck on this; re-check the state first."
      deescalation_note: "[router] The tests pass again; carry on with routine work."
    description: the agent's own tool activity picks the tier, no extra model call
  cascade:
    type: cascade
    stages:
      - {{type: stage_router, capable: frontier, efficient: efficient, confidence_threshold: 0.5,
         tool_semantics: {{edit_file: edit}}}}
      - {{type: llm_classifier, mode: capability, classifier_target: judge, strong_target: frontier,
         weak_target: efficient, base_threshold: 0.6, classify_trigger: user_turn}}
    default: frontier
    description: tool signals first; when they are not decisive a judge forecasts; else frontier
  plan:
    type: plan_execute
    capable: frontier
    efficient: efficient
    replan: {{after_failures: 2}}
    description: the frontier model plans each request (and re-plans on trouble), the efficient model executes
  advisor:
    type: advisor
    executor_target: efficient
    advisor_target: advisor
    gate_trigger: no_tool_call
    gate_min_tool_results: 1
    max_reviews: 3
    redo_feedback_prefix: "[router] A reviewer sent your last turn back: "
    description: the efficient model does every turn; the frontier model reviews each claimed finish
"""


@dataclass(slots=True)
class Scenario:
    """One agent session of the demo.

    Attributes:
        title: Heading printed above the table.
        route: Route the agent calls.
        via: ``drop-in`` (in-process OpenAI client) or ``proxy`` (real SDK over HTTP, streaming).
        tasks: The user's requests, one after the other.
        parser: Whether the repository has the parser the stage-router task is about.
        legend: Printed under the table.
    """

    title: str
    route: str
    via: str
    tasks: list[str] = field(default_factory=lambda: list(TASKS))
    parser: bool = False
    legend: str = ""


SCENARIOS: list[Scenario] = [
    Scenario("Random 3:1 router, drop-in OpenAI client (in-process, no server)", "mix", "drop-in"),
    Scenario("Random 3:1 router, real openai SDK through the proxy (SSE streaming)", "mix", "proxy"),
    Scenario("LLM classifier: a judge forecasts each user turn (drop-in client)", "classify", "drop-in"),
    Scenario(
        "Escalation: efficient first, a judge reviews each turn, 2 confirmations latch (proxy, SSE)", "watch", "proxy"
    ),
    Scenario(
        "Stage router: escalates on a repeated traceback, holds, drops back when tests pass (drop-in)",
        "stage",
        "drop-in",
        tasks=list(STAGE_TASKS),
        parser=True,
        legend=(
            "sources: fall_open = no decisive signal, the picker's default (efficient); override = the same\n"
            "traceback twice in the last three results; hold = hold_turns keeps the frontier model after\n"
            "the switch; tests_passed = tests pass after code changes with no error in the window."
        ),
    ),
    Scenario(
        "Cascade: stage router, then a judge when the signals are not decisive, frontier by default (drop-in)",
        "cascade",
        "drop-in",
        tasks=list(STAGE_TASKS),
        parser=True,
        legend=(
            "sources: cascade:N/TYPE = stage N decided (the earlier stages abstained); the stage router\n"
            "abstains without a decisive signal, the judge then forecasts at each user turn and its\n"
            "choice holds for the turn's tool calls (affinity); cascade:default = every stage abstained."
        ),
    ),
    Scenario(
        "Plan/execute: the frontier model plans each request, the efficient model runs its tool steps (drop-in)",
        "plan",
        "drop-in",
        tasks=list(STAGE_TASKS),
        parser=True,
        legend=(
            "sources: plan = the first turn of a user request (the plan stays in the history the efficient\n"
            "model continues); execute = a tool step; replan = the last two tool results failed since the\n"
            "last plan, so the frontier model plans again."
        ),
    ),
    Scenario(
        "Advisor gate: the efficient model works, the frontier model reviews each finish (proxy, SSE)",
        "advisor",
        "proxy",
        legend=(
            "sources: advisor:no_trigger = a tool-calling turn, served as is; advisor:approve = reviewed\n"
            "and replayed unchanged; advisor:redo = sent back with a plan (here: run the tests after the\n"
            "edit) and answered again by the efficient model. 'judge' counts the advisor's review and the\n"
            "discarded turn; their cost is in the turn's cost."
        ),
    ),
]


def _turn(client: Any, route: str, messages: list[dict[str, Any]], session: str, stream: bool) -> dict[str, Any]:
    """One model call; returns the assistant message as a Chat dict."""
    headers = {"x-switchyard-session-id": session}
    if not stream:
        msg = (
            client.chat.completions.create(model=route, messages=messages, tools=TOOLS, extra_headers=headers)
            .choices[0]
            .message
        )
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls or []
        ]
        return {"role": "assistant", "content": msg.content, **({"tool_calls": calls} if calls else {})}
    text = ""
    calls_by_index: dict[int, dict[str, Any]] = {}
    with client.chat.completions.create(
        model=route, messages=messages, tools=TOOLS, stream=True, extra_headers=headers
    ) as chunks:
        for chunk in chunks:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            text += delta.content or ""
            for tc in delta.tool_calls or []:
                slot = calls_by_index.setdefault(
                    tc.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                slot["id"] = tc.id or slot["id"]
                if tc.function is not None:
                    slot["function"]["name"] += tc.function.name or ""
                    slot["function"]["arguments"] += tc.function.arguments or ""
    calls = [calls_by_index[i] for i in sorted(calls_by_index)]
    return {"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})}


def run_session(
    client: Any,
    route: str,
    session: str,
    *,
    stream: bool,
    max_turns: int = 12,
    tasks: list[str] | None = None,
    parser: bool = False,
) -> int:
    """Drives the scripted agent through every task; returns the number of model calls."""
    repo = Repo(parser=parser)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful coding agent."}]
    calls = 0
    for task in tasks or TASKS:
        messages.append({"role": "user", "content": task})
        for _ in range(max_turns):
            reply = _turn(client, route, messages, session, stream)
            calls += 1
            messages.append(reply)
            tool_calls = reply.get("tool_calls") or []
            if not tool_calls:
                break
            for call in tool_calls:
                output = repo.call(call["function"]["name"], parse_args(call["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    return calls


def _table(records: list[DecisionRecord], frontier_cost: Callable[[Usage], float]) -> tuple[float, float]:
    header = (
        f"{'turn':>4}  {'route':<10} {'target':<10} {'model':<24} {'source':<24} {'tokens in/out':>14} "
        f"{'judge':>5} {'cost USD':>11}"
    )
    print(header)
    print("-" * len(header))
    total = baseline = 0.0
    for i, rec in enumerate(records, 1):
        usage = Usage(input_tokens=rec.input_tokens, output_tokens=rec.output_tokens)
        total += rec.total_cost_usd
        baseline += frontier_cost(usage)
        tokens = f"{rec.input_tokens}/{rec.output_tokens}"
        print(
            f"{i:>4}  {rec.route:<10} {rec.selected or '-':<10} {(rec.selected_model or '-')[:24]:<24} "
            f"{rec.source:<24} {tokens:>14} {rec.router_cost.calls:>5} {rec.total_cost_usd:>11.6f}"
        )
    return total, baseline


def main(*, show_config: bool = False, use_proxy: bool = True) -> int:
    """Runs the demo; returns the process exit status."""
    from switchyard.api import Switchyard
    from switchyard.config.load import load_config
    from switchyard.testing import FakeUpstream, serve_fake

    if show_config:
        print(CONFIG_TEMPLATE.format(efficient_port="<port>", frontier_port="<port>"))
        return 0
    efficient_model, frontier_model = models()
    servers = [
        serve_fake(FakeUpstream([efficient_model, judge_model()])),
        serve_fake(FakeUpstream([frontier_model, advisor_model()])),
    ]
    try:
        import yaml

        text = CONFIG_TEMPLATE.format(efficient_port=servers[0].port, frontier_port=servers[1].port)
        sy = Switchyard(load_config(yaml.safe_load(text)))
        records: list[DecisionRecord] = []
        lock = threading.Lock()

        def keep(record: DecisionRecord) -> None:
            with lock:
                records.append(record)

        sy.on_decision(keep)
        frontier_price = sy.loaded.config.targets["frontier"].price
        print("Switchyard demo — simulated models on 127.0.0.1, no keys, no GPU")
        print("  efficient: nemotron-lightning-sim  $0.10 / $0.40 per Mtok in/out (fast, terse)")
        print("  frontier:  frontier-sim            $15 / $75 per Mtok in/out (slower, verbose)")
        grand = grand_baseline = 0.0
        for scenario in SCENARIOS:
            if scenario.via == "proxy" and not use_proxy:
                continue
            session = f"demo-{uuid.uuid4().hex[:8]}"
            started = time.perf_counter()
            calls = _run_scenario(sy, scenario, session)
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                with lock:
                    mine = [r for r in records if r.session_id == session]
                if len(mine) >= calls:
                    break
                time.sleep(0.01)
            print(f"\n== {scenario.title}")
            total, baseline = _table(mine, frontier_price.cost)
            if scenario.legend:
                print(scenario.legend)
            saved = 100 * (1 - total / baseline) if baseline else 0.0
            elapsed = time.perf_counter() - started
            print(
                f"session: {calls} model calls in {elapsed:.2f}s, ${total:.6f} — "
                f"always-frontier: ${baseline:.6f} for the same tokens ({saved:.0f}% saved)"
            )
            grand += total
            grand_baseline += baseline
        if grand_baseline:
            print(
                f"\nAll sessions: ${grand:.6f} routed vs ${grand_baseline:.6f} always-frontier "
                f"({100 * (1 - grand / grand_baseline):.0f}% saved)."
            )
        print("Note: 'always-frontier' prices each turn's actual tokens at the frontier model's rates.")
        print(
            "'judge' counts model calls the router made itself (judge verdicts, buffered efficient turns "
            "it discarded); their cost is in the turn's cost. The simulated judge follows toy rules."
        )
        sy.close()
    finally:
        for server in servers:
            server.stop()
    return 0


def _run_scenario(sy: Any, scenario: Scenario, session: str) -> int:
    from switchyard.dropin import OpenAI

    if scenario.via == "drop-in":
        client = OpenAI(switchyard=sy)
        try:
            return run_session(
                client, scenario.route, session, stream=False, tasks=scenario.tasks, parser=scenario.parser
            )
        finally:
            client.close()
    import openai

    from switchyard.server.runner import ServerThread

    with ServerThread(sy) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="demo", max_retries=0)
        try:
            return run_session(
                client, scenario.route, session, stream=True, tasks=scenario.tasks, parser=scenario.parser
            )
        finally:
            client.close()
