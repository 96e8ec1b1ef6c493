"""A route's ``experiment:`` block: shadow mode and a control group, as route settings.

Layer: ``routers`` — pure (pydantic and the standard library).

* ``mode: shadow`` — the route's router decides as usual and the decision is recorded as
  ``details.would_select`` (with what that target would have charged, ``would_cost_usd``), while
  the route's baseline target serves every request: savings are estimated before routing is
  trusted with a single answer. With ``mirror_share: 0.1``, a sticky tenth of the shadow
  sessions also sends each request to the target the router chose, off the caller's path, so
  that the prediction rests on what that target actually spends (``engine/mirror.py``).
* ``control_share: 0.1`` — a random, *sticky* tenth of the sessions stays on the baseline (the
  ``control`` arm) and the rest are routed (the ``routed`` arm). The assignment is a hash of the
  tenant and the session id (:func:`control_draw`), so every replica and worker process agrees on
  it without sharing any state, and every request of a session lands in the same arm.

The engine applies the block (:mod:`switchyard.engine.experiment`); each decision record names
its ``details.arm`` (``shadow``, ``control`` or ``routed``). ``docs/rollout.md`` explains the
sequence shadow → control share → tune.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ExperimentMode = Literal["route", "shadow"]

ARMS = ("shadow", "control", "routed")
"""The values of a record's ``details.arm``."""


class ExperimentSpec(BaseModel):
    """A route's ``experiment:`` block.

    Attributes:
        mode: ``route`` (default: the router's choice serves, except for the control share) or
            ``shadow`` (the router decides and its choice is recorded; the baseline serves).
        control_share: Share of sessions kept on the baseline, in [0, 1) (``mode: route`` only).
        baseline: The target that serves shadow and control requests (default: the route's
            capable tier). Must be one of the route's own targets.
        mirror_share: Share of shadow sessions whose requests are also sent to the target the
            router chose, after the caller's answer (``mode: shadow`` only): the answer is
            discarded, its usage and cost recorded (``details.mirror``) and counted as spend.
        mirror_concurrency: Most mirror calls in flight per route and event loop; a request
            whose mirror would exceed it is not mirrored (``details.mirror.skipped: busy``).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    mode: ExperimentMode = "route"
    control_share: float = Field(default=0.0, ge=0.0, lt=1.0, allow_inf_nan=False)
    baseline: str | None = None
    mirror_share: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    mirror_concurrency: int = Field(default=4, ge=1, le=1024)

    @model_validator(mode="after")
    def _one_experiment(self) -> ExperimentSpec:
        if self.mode == "shadow" and self.control_share > 0:
            raise ValueError(
                "control_share needs mode: route (in shadow mode every session is served by the baseline already)"
            )
        return self


def control_draw(tenant: str | None, session_id: str) -> float:
    """A number in [0, 1) fixed by the tenant and the session id: the session is in the control
    arm when it is below the route's ``control_share``.

    SHA-256, not Python's ``hash`` (salted per process): every replica and worker draws the
    same number for the same session, so the arm holds without shared state. The tenant is part
    of the input so that two tenants' same session id are two independent draws.
    """
    digest = hashlib.sha256(f"{tenant or ''}\x00{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def mirror_draw(tenant: str | None, session_id: str) -> float:
    """A number in [0, 1) fixed by the tenant and the session id, independent of
    :func:`control_draw`: a shadow session is mirrored when it is below ``mirror_share``.

    Per session, not per request: the correction's interval resamples sessions (the requests of
    one session are not independent), and every request of a mirrored session is measured, so
    a mirrored session's would-be cost is known whole.
    """
    digest = hashlib.sha256(f"mirror\x00{tenant or ''}\x00{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


__all__ = ["ARMS", "ExperimentMode", "ExperimentSpec", "control_draw", "mirror_draw"]
