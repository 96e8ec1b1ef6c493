"""Test-only routers (registered under ``test_*`` types) and small data writers for eval tests.

These are score sources the tests control, not shipped routing policies.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from switchyard.protocol.call import ModelCall
from switchyard.protocol.errors import RouterError
from switchyard.protocol.request import ChatRequest
from switchyard.routers import register
from switchyard.routers.base import BuildContext, Decision, RouteContext, Router, RouterSpec, Tiers

_SCORE = re.compile(r"score=([0-9.]+)")


def hash_score(text: str) -> float:
    """A deterministic pseudo-uniform number in [0, 1) from ``text``."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class ScoreRouter:
    """Capable iff score >= threshold; the score is written in the prompt (``score=0.7``) or hashed from it."""

    def __init__(self, capable: str, efficient: str, threshold: float, score_from: str) -> None:
        self.capable, self.efficient, self.threshold, self.score_from = capable, efficient, threshold, score_from

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        text = request.last_user_text()
        if self.score_from == "hash":
            score: float | None = hash_score(text)
        else:
            m = _SCORE.search(text)
            score = float(m.group(1)) if m else None
        if score is None:  # no score: a fixed rule, like an override
            return Decision(candidates=(self.capable, self.efficient), source="override", reason="no score")
        pick = self.capable if score >= self.threshold else self.efficient
        other = self.efficient if pick == self.capable else self.capable
        return Decision(candidates=(pick, other), source="test-score", score=score)


@register
class ScoreSpec(RouterSpec):
    kind = "test_score"
    type: Literal["test_score"]
    capable: str
    efficient: str
    threshold: float = 0.5
    score_from: Literal["prompt", "hash"] = "prompt"

    def target_refs(self) -> list[tuple[str, str]]:
        return [("capable", self.capable), ("efficient", self.efficient)]

    def tiers(self) -> Tiers | None:
        return {"capable": self.capable, "efficient": self.efficient}

    def threshold_key(self) -> str | None:
        return "threshold"

    def build(self, ctx: BuildContext) -> Router:
        return ScoreRouter(self.capable, self.efficient, self.threshold, self.score_from)


class SolveRouter(ScoreRouter):
    """Efficient iff ``p_solve = 1 - score`` reaches ``min_p_solve`` (a threshold on another scale)."""

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        decision = await ScoreRouter(self.capable, self.efficient, 0.0, "prompt").route(request, ctx, call)
        if decision.score is None:
            return decision
        weak = 1.0 - decision.score >= self.threshold
        pick, other = (self.efficient, self.capable) if weak else (self.capable, self.efficient)
        return Decision(candidates=(pick, other), source="test-solve", score=decision.score)


@register
class SolveSpec(RouterSpec):
    kind = "test_solve"
    type: Literal["test_solve"]
    capable: str
    efficient: str
    min_p_solve: float = 0.5

    def target_refs(self) -> list[tuple[str, str]]:
        return [("capable", self.capable), ("efficient", self.efficient)]

    def tiers(self) -> Tiers | None:
        return {"capable": self.capable, "efficient": self.efficient}

    def threshold_key(self) -> str | None:
        return "min_p_solve"

    def threshold_for_score(self, score_threshold: float) -> float:
        return 1.0 - score_threshold

    def build(self, ctx: BuildContext) -> Router:
        return SolveRouter(self.capable, self.efficient, self.min_p_solve, "prompt")


class JudgeRouter:
    """Asks a judge target; capable when the judge's answer mentions 'hard', no decision when it says 'refuse'."""

    def __init__(self, capable: str, efficient: str, judge: str) -> None:
        self.capable, self.efficient, self.judge = capable, efficient, judge

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        verdict = await call(self.judge, request)
        if "refuse" in verdict.text.lower():
            raise RouterError("the judge gave no verdict")
        hard = "hard" in verdict.text.lower()
        pick = self.capable if hard else self.efficient
        return Decision(candidates=(pick,), source="test-judge", score=1.0 if hard else 0.0)


@register
class JudgeSpec(RouterSpec):
    kind = "test_judge"
    type: Literal["test_judge"]
    capable: str
    efficient: str
    judge: str

    def target_refs(self) -> list[tuple[str, str]]:
        return [("capable", self.capable), ("efficient", self.efficient)]

    def auxiliary_refs(self) -> list[tuple[str, str]]:
        return [("judge", self.judge)]

    def tiers(self) -> Tiers | None:
        return {"capable": self.capable, "efficient": self.efficient}

    def build(self, ctx: BuildContext) -> Router:
        return JudgeRouter(self.capable, self.efficient, self.judge)


class SessionRouter:
    """Counts the requests of each session in the state store; escalates from the third one."""

    def __init__(self, capable: str, efficient: str) -> None:
        self.capable, self.efficient = capable, efficient

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        state = await ctx.store.get("count") or {"n": 0}
        n = int(state["n"]) + 1
        await ctx.store.set("count", {"n": n})
        pick = self.capable if n >= 3 else self.efficient
        return Decision(
            candidates=(pick,),
            source="test-session",
            score=min(1.0, n / 10),
            reason=f"request {n} of session {ctx.session.session_id}",
            details={"seen": n, "turn_index": ctx.session.turn_index},
        )


@register
class SessionSpec(RouterSpec):
    kind = "test_session"
    stateful = True
    type: Literal["test_session"]
    capable: str
    efficient: str

    def target_refs(self) -> list[tuple[str, str]]:
        return [("capable", self.capable), ("efficient", self.efficient)]

    def tiers(self) -> Tiers | None:
        return {"capable": self.capable, "efficient": self.efficient}

    def build(self, ctx: BuildContext) -> Router:
        return SessionRouter(self.capable, self.efficient)


# -- files -------------------------------------------------------------------------------------

SCORES = [0.95, 0.85, 0.75, 0.65, 0.45, 0.35, 0.25, 0.15]
STRONG = [1, 1, 1, 1, 1, 1, 0, 1]  # q_strong = 7/8
WEAK = [0, 1, 0, 1, 1, 1, 0, 0]  # q_weak = 4/8


def rows(models: tuple[str, ...] = ("strong-m", "weak-m")) -> list[dict[str, Any]]:
    out = []
    for i, (s, a, b) in enumerate(zip(SCORES, STRONG, WEAK, strict=True)):
        m: dict[str, Any] = {}
        if "strong-m" in models:
            m["strong-m"] = {"correct": bool(a), "cost_usd": 0.01}
        if "weak-m" in models:
            m["weak-m"] = {"correct": bool(b), "input_tokens": 100, "output_tokens": 100}
        out.append({"id": f"q{i}", "prompt": f"score={s} question {i}", "models": m})
    return out


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def config_text(
    routes: str, *, base_url: str = "http://127.0.0.1:9/v1", extra_clients: str = "", extra_targets: str = ""
) -> str:
    """A config with targets ``capable`` (model strong-m) and ``efficient`` (model weak-m) plus ``routes``."""
    return (
        "# test config\n"
        "llm_clients:\n"
        f"  local: {{format: openai_chat, base_url: {base_url}}}\n"
        f"{extra_clients}"
        "targets:\n"
        "  capable: {client: local, model: strong-m, price: {input_per_mtok: 10, output_per_mtok: 30}}\n"
        "  efficient: {client: local, model: weak-m, price: {input_per_mtok: 0.1, output_per_mtok: 0.4}}\n"
        f"{extra_targets}"
        "routes:\n"
        f"{routes}"
    )


def data_dir() -> Path | None:
    """``SWITCHYARD_DATA_DIR`` or ``<repo>/../shared/data`` when it exists."""
    env = os.environ.get("SWITCHYARD_DATA_DIR")
    root = Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared" / "data"
    return root if root.is_dir() else None
