"""Simulated models for ``switchyard fake-upstream``: one server, every model name answers.

The fake upstream of :mod:`switchyard.testing.fake_upstream` knows models by name; this module
decides what an *unknown* name becomes, so that any config (the examples, a user's own) runs
against it unchanged:

* a name that looks like a cheap or local model (``lightning``, ``nemotron``, ``efficient``,
  ``mini``, ``small``, ``haiku``, ``judge``, ``flash``) is an *efficient* model: fast first
  byte, fast stream;
* anything else is a *frontier* model: slower first byte, slower stream;
* a fault name (``fail-500``, ``stall-mid`` …, see :data:`~switchyard.testing.fake_common.FAULTS`)
  still selects the fault.

Both kinds share one brain: a request that asks for structured output (``response_format``)
is a judge call and gets a verdict (:func:`judge_turn`); an advisor review (the transcript
``type: advisor`` sends) gets ``APPROVE`` or ``REDO`` (:func:`advisor_turn`); anything else is
answered by :func:`~switchyard.testing.fake_common.echo_brain` (echoes the user, calls a tool when
asked to).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from switchyard._dataclass import dataclass
from switchyard.routers.advisor.review import TURN_HEADER
from switchyard.testing.fake_common import (
    FakeModel,
    Turn,
    content_text,
    echo_brain,
    is_fault,
    last_user_text,
)
from switchyard.testing.fake_decision import is_rlcd_request, rlcd_turn
from switchyard.testing.fake_upstream import FakeUpstream
from switchyard.testing.judges import under_review, verdict_kind

_EFFICIENT = re.compile(r"lightning|nemotron|efficient|mini|small|haiku|judge|flash|mixtral", re.IGNORECASE)
_HARD = re.compile(r"debug|traceback|race condition|deadlock|architecture|design|prove|refactor|diagnos", re.I)
_TROUBLE = re.compile(r"traceback|failed|error:|exit code [1-9]", re.IGNORECASE)

REVIEW_HEADERS = (TURN_HEADER, "The executor's latest turn (a plan, or its claim the task is done):")
"""Where the turn under review starts in an advisor's review request: Switchyard's ``type: advisor``
transcript, and NeMo Switchyard 0.3.0's advisor gate (as its server sends it)."""

KEEP_RECEIVED = 256
"""Requests kept for inspection by a long-running server (older ones are dropped)."""

PRELISTED = (
    "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4",
    "nemotron-3.5-lightning",
    "fake-efficient",
    "fake-capable",
    "frontier-large",
)
"""Model ids ``GET /v1/models`` lists from the start (the ones the examples name)."""


@dataclass(frozen=True, slots=True)
class Profile:
    """Latencies of one kind of simulated model.

    Attributes:
        first_byte_s: Delay before the answer starts.
        per_chunk_s: Delay between stream chunks.
    """

    first_byte_s: float
    per_chunk_s: float


EFFICIENT = Profile(first_byte_s=0.02, per_chunk_s=0.002)
FRONTIER = Profile(first_byte_s=0.15, per_chunk_s=0.01)


def kind_of(name: str) -> str:
    """``efficient`` or ``frontier``: which simulated model a name stands for."""
    return "efficient" if _EFFICIENT.search(name) else "frontier"


def _schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") != "json_schema":
        return None
    schema = (fmt.get("json_schema") or {}).get("schema")
    return schema if isinstance(schema, dict) else None


def _instance(schema: dict[str, Any], hard: bool) -> Any:
    """A value satisfying a simple JSON Schema; enums pick their last value for hard requests."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][-1 if hard else 0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: _instance(v if isinstance(v, dict) else {}, hard) for k, v in props.items()}
    if kind == "array":
        return []
    if kind == "number":
        low, high = float(schema.get("minimum", "-inf")), float(schema.get("maximum", "inf"))
        return min(max(0.8, low), high)
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "simulated"


def judge_turn(body: dict[str, Any]) -> Turn:
    """The verdict of a simulated judge, by the kind of question it is asked.

    * capability forecast: ``p_solve`` 0.3 for requests that look hard (debugging, design,
      tracebacks), else 0.85;
    * escalation review: escalate when the turn under review shows a failure (a traceback,
      ``FAILED``, ``error:``, a non-zero exit code);
    * hand-back check: never hands back;
    * decision-model request (RLCD): a probability per offered label
      (:func:`~switchyard.testing.fake_decision.rlcd_turn`);
    * anything else with a JSON Schema: an object that satisfies it (an ``enum`` takes its last
      value when the request looks hard, else its first).
    """
    # Everything but the instructions: routers put the transcript in one user message, NVIDIA's
    # in several (the task, then a routing instruction).
    said = [m for m in body.get("messages") or [] if m.get("role") not in ("system", "developer")]
    view = "\n".join(content_text(m.get("content")) for m in said)
    kind = verdict_kind(body)
    hard = bool(_HARD.search(view))
    verdict: Any
    if is_rlcd_request(body):
        return rlcd_turn(body, view)
    if kind == "capability":
        p = 0.3 if hard else 0.85
        rule, boundary = ("UNC-1", "uncertain") if hard else ("SUP-1", "supported")
        verdict = {"crux": "simulated forecast", "primary_rule": rule, "capability_boundary": boundary, "p_solve": p}
    elif kind == "escalation":
        trouble = bool(_TROUBLE.search(under_review(view) or view))
        verdict = {"reason": "the turn shows a failure" if trouble else "progressing", "escalate": trouble}
    elif kind == "hand_back":
        verdict = {"reason": "the simulated judge keeps the capable model", "hand_back": False}
    else:
        verdict = _instance(_schema_of(body) or {"type": "object"}, hard)
    return Turn(text=orjson.dumps(verdict).decode())


def advisor_turn(review: str) -> Turn:
    """The verdict of a simulated advisor on one review transcript.

    ``REDO`` (with a one-line plan) when the executor's turn under review reports a failure (a
    traceback, ``FAILED``, ``error:``, a non-zero exit code), else ``APPROVE``.
    """
    turn = review
    for header in REVIEW_HEADERS:
        turn = turn.split(header, 1)[-1]
    if _TROUBLE.search(turn):
        return Turn(text="REDO: the last tool result shows a failure. Fix it and run the tests again before finishing.")
    return Turn(text="APPROVE")


def simulated_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    """Judge calls (``response_format`` set) get a verdict, advisor reviews ``APPROVE``/``REDO``;
    an efficient model asked something ``sloppy`` with tools calls the first tool with no
    arguments; everything else is echoed."""
    if body.get("response_format"):
        return judge_turn(body)
    user = last_user_text(body)
    if any(header in user for header in REVIEW_HEADERS):
        return advisor_turn(user)
    tools = body.get("tools") or []
    if tools and "sloppy" in user.lower() and kind_of(model.name) == "efficient":
        # A small model's slip: the first tool, called without the arguments its schema
        # requires (what a route's `verify:` block catches; docs/verify.md).
        return Turn(tool_calls=[(str((tools[0].get("function") or {}).get("name", "tool")), {})])
    return echo_brain(body, model)


class SimulatedUpstream(FakeUpstream):
    """A :class:`FakeUpstream` where every model name is an efficient or frontier simulation.

    Args:
        latency_scale: Multiplies every simulated latency (0 = answer at once).
        stall_s: How long the stall faults stay silent.
    """

    def __init__(self, *, latency_scale: float = 1.0, stall_s: float = 30.0) -> None:
        super().__init__(stall_s=stall_s)
        self.keep = KEEP_RECEIVED  # a server left running for hours must not keep every request body
        self.latency_scale = latency_scale
        for name in PRELISTED:
            self.model(name)

    def model(self, name: str) -> FakeModel:
        """The model called ``name``, created from its profile on first use."""
        found = self.models.get(name)
        if found is None:
            profile = EFFICIENT if kind_of(name) == "efficient" or is_fault(name) else FRONTIER
            found = self.models[name] = FakeModel(
                name,
                brain=simulated_brain,
                first_byte_s=profile.first_byte_s * self.latency_scale,
                per_chunk_s=profile.per_chunk_s * self.latency_scale,
            )
        return found
