"""The one join of decisions and feedback (issue 48): by tenant and session or request id, the
latest report winning, reports naming no record kept."""

from __future__ import annotations

from typing import Any

from switchyard.engine.joined_log import join_log


def rec(request_id: str, session: str | None, tenant: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"route": "agent", "request_id": request_id, "session_id": session, "tenant": tenant, **kw}


def fb(ts: float, tenant: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"object": "switchyard.feedback", "ts": ts, "tenant": tenant, **kw}


def test_latest_report_wins_whatever_the_file_order() -> None:
    joined = join_log(
        [
            rec("r1", "s1"),
            fb(20.0, session_id="s1", resolved=True),
            fb(10.0, session_id="s1", resolved=False),  # written later, reported earlier
            rec("r2", "s1"),
        ]
    )
    (session,) = joined.sessions.values()
    assert [r["request_id"] for r in session.records] == ["r1", "r2"]
    assert session.outcome == {"resolved": 1.0}
    assert session.reports == 2


def test_a_report_joins_its_own_tenants_session_only() -> None:
    lines = [
        rec("r1", "s1", tenant="acme"),
        rec("r2", "s1", tenant="globex"),
        fb(1.0, tenant="globex", session_id="s1", score=0.25),
        fb(2.0, tenant="initech", request_id="r1", resolved=True),  # acme's request, another tenant
    ]
    joined = join_log(lines)
    assert joined.sessions[("acme", "s1")].outcome == {}
    assert joined.sessions[("globex", "s1")].outcome == {"score": 0.25}
    assert [u.get("request_id") for u in joined.unmatched] == ["r1"]
    only = join_log(lines, tenant="acme")
    assert list(only.sessions) == [("acme", "s1")]
    assert only.reports == 0 and not only.unmatched


def test_by_request_id_and_unknown_ids_are_kept() -> None:
    joined = join_log(
        [
            rec("r1", None),
            rec("r2", "s2", status=502),
            fb(1.0, request_id="r1", reward=-2.5),
            fb(2.0, session_id="never-seen", resolved=True),
            fb(3.0, request_id="r2", resolved=True),  # a failed request joins nothing
        ],
        feedback=[{"session_id": "late", "resolved": False, "ts": 4.0}],
    )
    assert joined.sessions[(None, "request:r1")].outcome == {"reward": -2.5}
    assert joined.failed == 1
    assert joined.reports == 4
    assert sorted(str(u.get("session_id") or u.get("request_id")) for u in joined.unmatched) == [
        "late",
        "never-seen",
        "r2",
    ]


def test_route_filter_keeps_the_route_and_its_arm() -> None:
    joined = join_log(
        [
            rec("r1", "a", details={"arm": "control"}),
            {**rec("r2", "b"), "route": "other"},
            fb(1.0, session_id="b", resolved=True),
        ],
        route="agent",
    )
    (session,) = joined.sessions.values()
    assert session.arm == "control" and session.route == "agent"
