"""A reload that would serve nothing is refused before any worker moves (issue 44): a config
without routes always, one without the routes that served traffic in the last minute unless
forced (server/reload_check.py, the supervisor of ``serve --workers``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from switchyard.cli import main
from switchyard.config.load import load_config
from switchyard.engine.records import DecisionRecord
from switchyard.server.reload_check import (
    RECENT_S,
    REPORT_EVERY_S,
    RecentRoutes,
    ServedRoutes,
    refusal,
    served_line,
)
from switchyard.server.workers import Supervisor, Worker


def _config(**routes: Any) -> dict[str, Any]:
    return {
        "llm_clients": {"up": {"base_url": "http://127.0.0.1:9/v1"}},
        "targets": {"t": {"client": "up", "model": "m"}},
        "routes": routes,
    }


ROUTE = {"type": "passthrough", "target": "t"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_config_without_routes_is_refused_even_when_forced() -> None:
    loaded = load_config(_config())
    assert "no routes" in (refusal(loaded, [], force=True) or "")
    assert "no routes" in (refusal(loaded, ["agent"]) or "")


@pytest.mark.parametrize(
    ("routes", "extra", "refused"),
    [
        ({"other": ROUTE}, {}, True),  # none of the routes in use
        ({"agent": ROUTE, "other": ROUTE}, {}, False),  # keeps one of them
        ({"renamed": {**ROUTE, "aliases": ["agent"]}}, {}, False),  # an alias still answers its callers
        ({"other": ROUTE}, {"default_route": "other"}, False),  # every model falls back to it
    ],
    ids=["gone", "kept", "alias", "default"],
)
def test_the_routes_in_use_must_survive_a_reload(routes: dict[str, Any], extra: dict[str, Any], refused: bool) -> None:
    loaded = load_config({**_config(**routes), **extra})
    why = refusal(loaded, ["agent", "fast"])
    assert (why is not None) is refused
    if refused:
        assert why is not None and "agent, fast" in why and "--force" in why
        assert refusal(loaded, ["agent", "fast"], force=True) is None
    assert refusal(loaded, []) is None  # no traffic lately: nothing to keep


def test_a_worker_reports_each_route_at_most_every_few_seconds() -> None:
    clock, told = Clock(), []
    report = ServedRoutes(told.append, clock=clock)
    for route in ("a", "a", "b", "a"):
        report(DecisionRecord(request_id="x", route=route, router="passthrough"))
    assert told == [served_line("a"), served_line("b")]
    clock.now += REPORT_EVERY_S
    report(DecisionRecord(request_id="y", route="a", router="passthrough"))
    assert told[-1] == served_line("a") and len(told) == 3


def test_the_supervisor_forgets_routes_after_a_minute() -> None:
    clock = Clock()
    recent = RecentRoutes(clock=clock)
    recent.heard(served_line('odd "name"\n'))
    recent.heard(b"T not json")
    recent.heard(b"X" + served_line("ignored")[1:])
    assert recent.recent() == ['odd "name"\n']
    clock.now += RECENT_S + REPORT_EVERY_S + 1
    assert recent.recent() == []


@pytest.fixture
def supervisor(tmp_path: Path) -> Any:
    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(_config(agent=ROUTE)))
    said: list[str] = []
    sup = Supervisor(str(path), "127.0.0.1", 0, 1, say=said.append)
    try:
        yield sup, path, said
    finally:
        sup._close()


def test_status_lines_arrive_in_pieces(supervisor: Any) -> None:
    sup, _, _ = supervisor
    read, write = os.pipe()
    os.set_blocking(read, False)
    worker = Worker(0, 1, subprocess.Popen([sys.executable, "-c", ""]), read, -1)
    worker.proc.wait()
    try:
        for piece in (b"R\nT", b'"ag', b'ent"\n', b"C\n"):
            os.write(write, piece)
            sup._on_status(worker)
    finally:
        os.close(write)
        os.close(read)
    assert worker.ready and worker.closed and sup.recent.recent() == ["agent"]


@pytest.mark.parametrize(
    ("routes", "why"),
    [({}, "the new config has no routes"), ({"other": ROUTE}, "none of the routes that served traffic")],
    ids=["no-routes", "routes-gone"],
)
def test_a_refused_reload_starts_no_worker(supervisor: Any, routes: dict[str, Any], why: str) -> None:
    sup, path, said = supervisor
    sup.recent.heard(served_line("agent"))
    path.write_text(yaml.safe_dump(_config(**routes)))
    assert sup.reload() is False
    assert not sup.workers and sup.generation == 1  # nothing moved
    assert any(why in line and "reload refused" in line for line in said), said
    assert said[-1] == "switchyard: the workers keep serving the previous config"
    assert not list(Path(sup._private).glob("config-2.yaml"))  # the refused copy is gone


def test_reload_help_teaches_force(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["reload", "--help"])
    text = capsys.readouterr().out
    assert "--force" in text and "kill -USR1" in text and "no routes" in text


def test_reload_names_a_missing_process(capsys: pytest.CaptureFixture[str]) -> None:
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    assert main(["reload", str(dead.pid)]) == 1
    assert "no process" in capsys.readouterr().err
