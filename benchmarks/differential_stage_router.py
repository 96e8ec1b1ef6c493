"""Differential check: our ``stage_router`` against NVIDIA's own (the ``nemo-switchyard`` wheel).

Every assistant turn of every trajectory becomes one routing request (the conversation up to
that turn). The request goes through our OpenAI Chat codec into our IR and through our stage
router, and — converted to NVIDIA's IR — through ``switchyard.libsy.algorithms.stage_router``
stepped with ``run_stream`` in a separate virtual environment. Both pickers by thresholds 0.0 /
0.5 / 0.7, with handoff notes on; as a cross-check the same Chat bodies also go through NVIDIA's
own server and Chat decoder (``/v1/decision``).

Reported per data set and config: tier agreement for ``compat: nvidia`` (expected 100%) and for
the default behaviour, whose every disagreement is attributed to one deliberate difference by
switching that difference back and seeing the decision match.

Data: the real tau-bench trajectories under ``$SWITCHYARD_DATA_DIR`` (default ``../shared/data``
from the repository root; skipped when absent) and the synthetic coding-agent trajectories of
``stage_trajectories.py``.

Setup and run (from the repository root)::

    python3 -m venv /tmp/nemo-venv && /tmp/nemo-venv/bin/pip install nemo-switchyard==0.3.0
    .venv/bin/python benchmarks/differential_stage_router.py [--nemo-python /tmp/nemo-venv/bin/python]
        [--data-dir ../shared/data] [--markdown report.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stage_trajectories import trajectories as synthetic_trajectories

from switchyard.protocol.messages import TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo
from switchyard.routers.base import RouteContext
from switchyard.routers.stage import (
    Behaviour,
    HandoffNotes,
    StageConfig,
    StageRouter,
    ToolKind,
)
from switchyard.state.memory import MemoryStore
from switchyard.wire import codec

REPO = Path(__file__).resolve().parent.parent
PICKERS = ("efficient_first", "capable_first")
THRESHOLDS = (0.0, 0.5, 0.7)
NOTES = {"escalation": "[router] escalated: re-check the state first.", "deescalation": "[router] back to routine."}

# tau-bench's airline tools in the stage router's vocabulary (read / write / plan), for the
# variant that shows what domain tool semantics change; NVIDIA calls these observe/mutate/plan.
TAU_SEMANTICS = {
    "get_user_details": "read",
    "get_reservation_details": "read",
    "search_direct_flight": "read",
    "search_onestop_flight": "read",
    "list_all_airports": "read",
    "calculate": "read",
    "think": "plan",
    "book_reservation": "write",
    "cancel_reservation": "write",
    "update_reservation_flights": "write",
    "update_reservation_baggages": "write",
    "update_reservation_passengers": "write",
    "send_certificate": "write",
}
_NVIDIA_KIND = {"read": "observe", "write": "mutate", "edit": "mutate", "plan": "plan"}

# Each deliberate difference of the default behaviour, and how to switch just that one back.
DIFFERENCES: dict[str, Any] = {
    "tests_passed rule": lambda b: replace(b, tests_shortcut=False),
    "capable_first ceiling fix": lambda b: replace(b, ceiling_fix=False),
    "tool-reported errors": lambda b: replace(b, profile=replace(b.profile, tool_errors=False)),
    "failing-test summaries": lambda b: replace(b, profile=replace(b.profile, failing_tests=False)),
    "Grep/Glob/LS as reads": lambda b: replace(b, profile=replace(b.profile, search_tools=False)),
    "compaction marker in user text only": lambda b: replace(
        b, profile=replace(b.profile, compaction_in_user_text_only=False)
    ),
    "chat-equivalent turn depth": lambda b: replace(b, profile=replace(b.profile, chat_equivalent_depth=False)),
    "exact arithmetic (vs 32-bit severities)": lambda b: replace(b, f32=True),
}


@dataclass
class Config:
    name: str
    picker: str
    threshold: float
    semantics: dict[str, str] = field(default_factory=dict)


@dataclass
class Turn:
    dataset: str
    trajectory: str
    body: dict[str, Any]
    request: ChatRequest


def load_turns(data_dir: Path | None) -> tuple[list[Turn], list[str]]:
    notes: list[str] = []
    sets: list[tuple[str, list[dict[str, Any]]]] = []
    tau = data_dir / "tau-bench-trajectories" / "tau_bench_airline_gpt4o.jsonl" if data_dir else None
    if tau is not None and tau.exists():
        with tau.open() as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        sets.append(("tau-bench", [{"id": r["id"], "messages": r["messages"]} for r in rows]))
    else:
        notes.append(f"tau-bench trajectories not found under {data_dir}; skipped")
    sets.append(("synthetic", synthetic_trajectories()))
    chat = codec("openai_chat")
    turns: list[Turn] = []
    for name, trajs in sets:
        for traj in trajs:
            messages = traj["messages"]
            for i, msg in enumerate(messages):
                if msg.get("role") != "assistant" or i == 0:
                    continue
                body = {"model": "stage", "messages": messages[:i]}
                turns.append(Turn(name, traj["id"], body, chat.decode_request(body)))
    return turns, notes


def to_nvidia_ir(request: ChatRequest) -> dict[str, Any]:
    """Our IR → the normalized request dict NVIDIA's libsy takes (instructions hoisted, as their
    Chat decoder does)."""
    instructions: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for msg in request.messages:
        blocks: list[dict[str, Any]] = []
        for part in msg.content:
            if isinstance(part, TextPart):
                blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, ToolCallPart):
                blocks.append({"type": "tool_call", "id": part.id, "name": part.name, "arguments": part.arguments})
            elif isinstance(part, ToolResultPart):
                inner = [{"type": "text", "text": p.text} for p in part.content if isinstance(p, TextPart)]
                blocks.append(
                    {
                        "type": "tool_result",
                        "tool_call_id": part.call_id,
                        "content": inner,
                        "is_error": True if part.is_error else None,
                    }
                )
        target = instructions if msg.role in ("system", "developer") else messages
        target.append({"role": msg.role, "content": blocks})
    return {"model": request.model, "instructions": instructions, "messages": messages}


def configs() -> list[Config]:
    out = [Config(f"{p}_{str(t).replace('.', '')}", p, t) for p in PICKERS for t in THRESHOLDS]
    out += [Config(f"{p}_05_tau_semantics", p, 0.5, TAU_SEMANTICS) for p in PICKERS]
    return out


def nvidia_configs(cfgs: list[Config]) -> list[dict[str, Any]]:
    out = []
    for c in cfgs:
        semantics: dict[str, list[str]] = {}
        for name, kind in c.semantics.items():
            semantics.setdefault(_NVIDIA_KIND[kind], []).append(name)
        out.append(
            {
                "name": c.name,
                "picker": c.picker,
                "threshold": c.threshold,
                "window": 3,
                "tool_semantics": semantics,
                "notes": NOTES,
            }
        )
    return out


def run_nvidia(python: str, cfgs: list[Config], turns: list[Turn]) -> dict[str, Any]:
    plain = [c for c in cfgs if not c.semantics]
    job = {
        "configs": nvidia_configs(cfgs),
        "server_configs": nvidia_configs(plain),
        "requests": [to_nvidia_ir(t.request) for t in turns],
        "chat_bodies": [t.body for t in turns],
    }
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "job.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(job))
        env = {**os.environ, "RUST_LOG": "error"}
        proc = subprocess.run(
            [python, str(Path(__file__).with_name("_nemo_stage_worker.py")), str(src), str(dst)],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"NVIDIA worker failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        result: dict[str, Any] = json.loads(dst.read_text())
        return result


def our_router(cfg: Config, behaviour: Behaviour) -> StageRouter:
    config = StageConfig(
        capable="capable",
        efficient="efficient",
        picker=cfg.picker,  # type: ignore[arg-type]
        threshold=cfg.threshold,
        semantics={k: ToolKind(v) for k, v in cfg.semantics.items()},
        notes=HandoffNotes(NOTES["escalation"], NOTES["deescalation"], when="every_turn"),
    )
    return StageRouter(config, behaviour=behaviour)


async def decide(router: StageRouter, turns: list[Turn]) -> list[tuple[str, str, float | None, str | None]]:
    ctx = RouteContext(route="stage", session=SessionInfo(), targets={}, store=MemoryStore())
    out = []
    for turn in turns:
        d = await router.route(turn.request, ctx, _no_call)
        note = None
        if d.request is not None:
            last = d.request.messages[-1]
            text = last.content[-1] if last.content else None
            if isinstance(text, TextPart) and text.text in NOTES.values():
                note = text.text
        out.append((d.details["tier"], d.source, d.confidence, note))
    return out


async def _no_call(targets: Any, request: ChatRequest) -> Any:
    raise AssertionError("the stage router made a model call")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", default="/tmp/nemo-venv/bin/python")
    default_data = os.environ.get("SWITCHYARD_DATA_DIR") or str(REPO.parent / "shared" / "data")
    parser.add_argument("--data-dir", default=default_data)
    parser.add_argument("--markdown", help="also write the report to this file")
    args = parser.parse_args()

    started = time.perf_counter()
    turns, notes = load_turns(Path(args.data_dir))
    cfgs = configs()
    if not Path(args.nemo_python).exists():
        print(f"cannot run NVIDIA's router: {args.nemo_python} does not exist (see the module docstring)")
        return 2
    theirs = run_nvidia(args.nemo_python, cfgs, turns)
    report = Report(turns, theirs, notes)
    for cfg in cfgs:
        report.add(cfg)
    text = report.render(time.perf_counter() - started)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    return 0


class Report:
    def __init__(self, turns: list[Turn], theirs: dict[str, Any], notes: list[str]) -> None:
        self.turns = turns
        self.theirs = theirs
        self.notes = notes
        self.rows: list[str] = []
        self.causes: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self.compat_mismatch: list[str] = []
        self.server_rows: list[str] = []

    def add(self, cfg: Config) -> None:
        theirs = self.theirs["results"][cfg.name]
        compat = asyncio.run(decide(our_router(cfg, Behaviour.of("nvidia")), self.turns))
        default_behaviour = Behaviour()
        default = asyncio.run(decide(our_router(cfg, default_behaviour), self.turns))
        # Each difference switched back alone, then each pair, to name the cause of a disagreement
        # (only the disagreeing turns are re-routed).
        flips = [((name,), flip) for name, flip in DIFFERENCES.items()]
        flips += [((a, b), _both(DIFFERENCES[a], DIFFERENCES[b])) for a, b in combinations(DIFFERENCES, 2)]
        differing = [i for i in range(len(self.turns)) if default[i][0] != theirs[i][0]]
        subset = [self.turns[i] for i in differing]
        variants: dict[str, dict[int, Any]] = {}
        for names, flip in flips:
            routed = asyncio.run(decide(our_router(cfg, flip(default_behaviour)), subset))
            variants[" + ".join(names)] = dict(zip(differing, routed, strict=True))
        for dataset in sorted({t.dataset for t in self.turns}):
            idx = [i for i, t in enumerate(self.turns) if t.dataset == dataset]
            if cfg.semantics and dataset != "tau-bench":
                continue
            n = len(idx)
            c_tier = sum(compat[i][0] == theirs[i][0] for i in idx)
            c_src = sum(compat[i][1] == theirs[i][1] for i in idx)
            c_conf = sum(_same_conf(compat[i], theirs[i]) for i in idx)
            c_note = sum(compat[i][3] == theirs[i][3] for i in idx)
            d_tier = sum(default[i][0] == theirs[i][0] for i in idx)
            causes: Counter[str] = Counter()
            for i in idx:
                if compat[i][:2] != tuple(theirs[i][:2]) or compat[i][3] != theirs[i][3]:
                    t = self.turns[i]
                    self.compat_mismatch.append(
                        f"{cfg.name} {t.trajectory} turn@{len(t.body['messages'])}: ours {compat[i]} theirs {theirs[i]}"
                    )
                if default[i][0] != theirs[i][0]:
                    cause = next((name for name, v in variants.items() if v[i][0] == theirs[i][0]), "several")
                    causes[cause] += 1
                    self.causes[cause] += 1
                    self.examples.setdefault(
                        cause, f"{self.turns[i].trajectory} at message {len(self.turns[i].body['messages'])}"
                    )
            capable = sum(theirs[i][0] == "capable" for i in idx)
            self.rows.append(
                f"| {dataset} | {cfg.picker} | {cfg.threshold:g}{' + tau semantics' if cfg.semantics else ''} | {n} "
                f"| {capable / n:.0%} | {_pct(c_tier, n)} | {_pct(c_src, n)} | {_pct(c_conf, n)} | {_pct(c_note, n)} "
                f"| {_pct(d_tier, n)} | {', '.join(f'{k}: {v}' for k, v in causes.most_common()) or '-'} |"
            )
        server = self.theirs.get("server", {}).get(cfg.name)
        if server is not None:
            agree = sum(s == theirs[i][0] for i, s in enumerate(server))
            self.server_rows.append(
                f"| {cfg.picker} | {cfg.threshold:g} | {len(server)} | {_pct(agree, len(server))} |"
            )

    def render(self, elapsed: float) -> str:
        sizes = ", ".join(f"{k}: {v}" for k, v in Counter(t.dataset for t in self.turns).items())
        out = [
            f"NVIDIA nemo-switchyard {self.theirs['version']} vs switchyard stage_router — "
            f"{len(self.turns)} routed turns ({sizes}), {elapsed:.1f} s",
            "",
            "| data | picker | threshold | turns | NVIDIA → capable | compat tier | compat source | compat confidence "
            "| compat note | default tier | default differences (cause: turns) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *self.rows,
            "",
            "NVIDIA's run_stream vs NVIDIA's own server + Chat decoder (/v1/decision), same Chat bodies:",
            "",
            "| picker | threshold | turns | tier agreement |",
            "|---|---|---|---|",
            *self.server_rows,
            "",
            f"compat mismatches: {len(self.compat_mismatch)}",
            *self.compat_mismatch[:20],
            "",
            "default-behaviour differences by cause (all configs): "
            + (", ".join(f"{k}: {v}" for k, v in self.causes.most_common()) or "none"),
            *(f"  e.g. {k}: {v}" for k, v in self.examples.items()),
            *self.notes,
            "",
            "command: .venv/bin/python benchmarks/differential_stage_router.py",
        ]
        return "\n".join(out)


def _both(f: Any, g: Any) -> Any:
    return lambda b: g(f(b))


def _same_conf(ours: tuple[Any, ...], theirs: list[Any]) -> bool:
    if theirs[1] != "dimensions":
        return ours[1] == theirs[1]
    return ours[2] == theirs[2]


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.2f}%" if n else "-"


if __name__ == "__main__":
    sys.exit(main())
