"""Replaying recorded agent trajectories through a route, one decision per assistant turn.

Layer: ``eval``.

A trajectory is one JSON object per line with an ``id`` and ``messages`` (OpenAI Chat messages,
tool calls and tool results included), as in ``tau-bench-trajectories``; a line with a
``prompt`` instead is one user message (a task file such as ``terminal_bench_paired_tasks``).
For the assistant message at index ``i`` the route decides ``messages[:i]`` — exactly what the
agent had sent when that turn was generated — under a session id equal to the trajectory id, so
stateful routers see one session per trajectory, turn by turn. A trajectory without assistant
messages has one decision, on all its messages (the turn the agent would ask for next). Nothing
is answered: the recorded turn follows.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.config.load import LoadedConfig
from switchyard.eval.dataset import DatasetError, json_lines
from switchyard.eval.evaluate import TierChoice
from switchyard.eval.offline import Decided, build_offline_engine, chat_request, decide, route_spec, run_pool
from switchyard.eval.progress import Progress
from switchyard.protocol.errors import SwitchyardError

OUTCOME_FIELDS = ("reward", "success", "is_resolved", "resolved")
"""Trajectory-level fields copied into every turn's line when present: tau-bench writes
``reward``/``success``, Terminal-Bench ``is_resolved``, SWE-bench harnesses ``resolved``."""

SUCCESS_FIELDS = ("success", "is_resolved", "resolved")
"""Boolean success fields, in the order they are read; ``reward`` (> 0 is a success) last."""


def succeeded(outcome: dict[str, Any]) -> bool | None:
    """Whether a trajectory succeeded, from the first success field it has; ``None`` if none.

    A boolean field is read as is; ``reward`` counts as a success when it is a number > 0.
    """
    for key in SUCCESS_FIELDS:
        value = outcome.get(key)
        if isinstance(value, bool):
            return value
    reward = outcome.get("reward")
    if isinstance(reward, int | float) and not isinstance(reward, bool) and math.isfinite(reward):
        return reward > 0
    return None


@dataclass(slots=True)
class Trajectory:
    """One recorded conversation."""

    id: str
    line: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    outcome: dict[str, Any]
    task: str | None = None
    """The line's ``task_id`` (several runs of one task share it), when it has one."""

    def assistant_turns(self) -> list[int]:
        """Indexes of the assistant messages; ``[len(messages)]`` when there is none."""
        turns = [i for i, m in enumerate(self.messages) if m.get("role") == "assistant"]
        return turns or [len(self.messages)]


@dataclass(slots=True)
class TurnDecision:
    """The route's decision for one recorded assistant turn."""

    trajectory: str
    turn: int
    message_index: int
    decided: Decided
    recorded: dict[str, Any]
    outcome: dict[str, Any]
    task: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """One line of the replay JSONL."""
        return {
            "trajectory": self.trajectory,
            "session_id": self.trajectory,
            **({"task_id": self.task} if self.task is not None else {}),
            "turn": self.turn,
            "message_index": self.message_index,
            **self.decided.to_dict(),
            "recorded": self.recorded,
            **self.outcome,
        }


def read_trajectories(path: str | Path, *, limit: int | None = None) -> Iterator[Trajectory]:
    """Streams trajectories from a JSONL file.

    Raises:
        DatasetError: The file is missing, or a line is not a trajectory (file and line named).
    """
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"trajectories not found: {p}")
    # islice stops before reading the line after the last trajectory asked for.
    yield from itertools.islice(_trajectories(p), None if limit is None else max(limit, 0))


def _trajectories(p: Path) -> Iterator[Trajectory]:
    for where, number, obj in json_lines(p):
        obj, messages = run_line(where, obj)
        task = obj.get("task_id")
        if task is not None and (not isinstance(task, str | int) or isinstance(task, bool)):
            raise DatasetError(f"{where}: 'task_id' must be a string, got {task!r}")
        tools = obj.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise DatasetError(f"{where}: 'tools' must be a list of tool definitions")
        outcome = {k: obj[k] for k in OUTCOME_FIELDS if k in obj}
        yield Trajectory(obj["id"], number, messages, tools, outcome, None if task is None else str(task))


def run_line(where: str, obj: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A trajectories line checked for what every reader needs: the object and its messages.

    A line may give a ``prompt`` string instead of ``messages`` (one user message).

    Args:
        where: The file and line, for errors.
        obj: The parsed line.

    Raises:
        DatasetError: The line is not an object with a non-empty string ``id``, or has neither a
            list of message objects nor a ``prompt``.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or not obj["id"]:
        raise DatasetError(f"{where}: each line must be an object with a string 'id'")
    messages = obj.get("messages")
    if messages is None and isinstance(obj.get("prompt"), str):
        messages = [{"role": "user", "content": obj["prompt"]}]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise DatasetError(f"{where}: 'messages' must be a list of chat message objects (or give a 'prompt')")
    return obj, messages


def _recorded(messages: list[dict[str, Any]], index: int) -> dict[str, Any]:
    if index >= len(messages):
        return {}  # the decision on a conversation's next, unrecorded turn
    message = messages[index]
    calls = message.get("tool_calls") or []
    names = [c.get("function", {}).get("name") for c in calls if isinstance(c, dict)]
    content = message.get("content")
    chars = len(content) if isinstance(content, str) else 0
    return {"tool_calls": names, "text_chars": chars}


@dataclass(slots=True)
class ReplaySummary:
    """Totals of a replay."""

    route: str
    router: str
    trajectories: int = 0
    turns: list[TurnDecision] = field(default_factory=list)
    tiers: TierChoice | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready totals (no per-turn lines)."""
        decided = [t for t in self.turns if t.decided.skipped is None]
        targets = Counter(t.decided.selected for t in decided)
        scores = [t.decided.score for t in decided if t.decided.score is not None]
        out: dict[str, Any] = {
            "route": self.route,
            "router": self.router,
            "trajectories": self.trajectories,
            "turns": len(self.turns),
            "decided": len(decided),
            "skipped": len(self.turns) - len(decided),
            "shares": {t: n / len(decided) for t, n in targets.items()} if decided else {},
            "sources": dict(Counter(t.decided.source for t in decided)),
            "router_cost_usd": math.fsum(t.decided.router_cost_usd for t in decided),
            "scores": _score_stats(scores),
            "skip_reasons": dict(Counter(t.decided.skipped for t in self.turns if t.decided.skipped)),
        }
        if self.tiers is not None:
            out["capable_share_by_success"] = self._by_success(decided, self.tiers.capable)
        return out

    @staticmethod
    def _by_success(decided: list[TurnDecision], capable: str) -> dict[str, float]:
        groups: dict[str, list[bool]] = {}
        for t in decided:
            ok = succeeded(t.outcome)
            if ok is not None:
                key = "success" if ok else "failure"
                groups.setdefault(key, []).append(t.decided.selected == capable)
        return {k: sum(v) / len(v) for k, v in groups.items() if v}


def _score_stats(scores: list[float]) -> dict[str, float] | None:
    if not scores:
        return None
    ordered = sorted(scores)

    def q(f: float) -> float:
        return ordered[min(len(ordered) - 1, int(f * len(ordered)))]

    return {
        "n": len(scores),
        "mean": statistics.fmean(scores),
        "min": ordered[0],
        "p10": q(0.1),
        "p50": q(0.5),
        "p90": q(0.9),
        "max": ordered[-1],
    }


async def replay(
    loaded: LoadedConfig,
    route: str,
    path: str | Path | Sequence[Trajectory],
    *,
    tiers: TierChoice | None = None,
    limit: int | None = None,
    concurrency: int = 1,
    progress: bool | None = None,
    on_turn: Callable[[TurnDecision], None] | None = None,
    first_only: bool = False,
) -> ReplaySummary:
    """Decides every assistant turn of every trajectory in ``path`` with route ``route``.

    Args:
        loaded: A validated config.
        route: Route name.
        path: Trajectories JSONL, or the trajectories themselves (``limit`` applies to both).
        tiers: The capable/efficient tiers, for the capable-share summary.
        limit: Only the first ``limit`` trajectories.
        concurrency: Trajectories replayed at once (turns of one trajectory stay in order).
        progress: ``False``: no progress; otherwise on stderr, redrawn in place on a terminal
            and as a plain line every 10 s elsewhere (:class:`~switchyard.eval.progress.Progress`).
        on_turn: Called for every turn's decision (e.g. to write the JSONL), in turn order
            within a trajectory.
        first_only: Decide only each trajectory's first turn (task-level routing: the first
            decision holds for the task).

    Raises:
        KeyError: No such route.
        DatasetError: The trajectories file is malformed.
    """
    spec = route_spec(loaded, route)
    summary = ReplaySummary(route, spec.type, tiers=tiers)
    show = progress is not False
    if isinstance(path, str | Path):
        source: Path | list[Trajectory] = Path(path)
        total = sum(1 for _ in read_trajectories(path, limit=limit)) if show else None
    else:
        source = list(path if limit is None else path[: max(limit, 0)])
        total = len(source)
    bar = Progress(total, f"replay {route}", enabled=None if show else False)
    offline = build_offline_engine(loaded)

    async def work(traj: Trajectory) -> list[TurnDecision]:
        turns: list[TurnDecision] = []
        points = traj.assistant_turns()
        for ordinal, index in enumerate(points[:1] if first_only else points):
            history = traj.messages[:index]
            try:
                request = chat_request(route, history, tools=traj.tools)
            except SwitchyardError as exc:
                decided = Decided(selected=None, skipped=f"history does not decode: {exc.message}")
            else:
                decided = await decide(offline.engine, request, traj.id)
            recorded = _recorded(traj.messages, index)
            turn = TurnDecision(traj.id, ordinal, index, decided, recorded, traj.outcome, traj.task)
            turns.append(turn)
            if on_turn is not None:
                on_turn(turn)
        return turns

    def done(traj: Trajectory, turns: list[TurnDecision]) -> None:
        summary.trajectories += 1
        summary.turns.extend(turns)
        bar.update()

    try:
        trajectories = read_trajectories(source, limit=limit) if isinstance(source, Path) else iter(source)
        await run_pool(trajectories, work, concurrency=concurrency, on_done=done)
    finally:
        bar.close()
        await offline.aclose()
    return summary
