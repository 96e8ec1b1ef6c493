"""``serve --workers``: the count it accepts, the memory-state warning, and its errors."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from _configs import skeleton_config

from switchyard.cli import main, worker
from switchyard.config.load import load_config
from switchyard.server.workers import memory_state_warning, worker_count


def test_worker_count_accepts_positive_integers_and_auto() -> None:
    assert worker_count("3") == 3
    assert worker_count("auto") == len(os.sched_getaffinity(0))
    for bad, message in (("0", "at least 1"), ("-2", "at least 1"), ("many", "positive integer or 'auto'")):
        with pytest.raises(ValueError, match=message):
            worker_count(bad)


def _stage(**extra: Any) -> dict[str, Any]:
    return {"type": "stage_router", "capable": "capable", "efficient": "efficient", **extra}


def test_memory_state_warning_names_the_stateful_routes_only_when_it_matters() -> None:
    config = skeleton_config(9)
    config["routes"]["plain"] = _stage()  # no hold_turns: keeps no session state
    assert memory_state_warning(load_config(config), 4) is None
    config["routes"] |= {"agent": _stage(hold_turns=1), "judged": _stage(hold_turns=2)}
    loaded = load_config(config)
    note = memory_state_warning(loaded, 2)
    assert note is not None and "route(s) agent, judged keep per-session state" in note and "redis" in note
    assert memory_state_warning(loaded, 1) is None
    config["state"] = {"backend": "redis", "url": "redis://127.0.0.1:6379/0"}
    assert memory_state_warning(load_config(config), 8) is None
    # Daily budgets are per-worker spend with memory state too.
    budget = skeleton_config(9)
    budget["server"] = {"api_keys": [{"name": "team", "key_env": "HOME", "budget_usd_per_day": 5}]}
    note = memory_state_warning(load_config(budget), 2)
    assert note is not None and "API key(s) team have daily budgets" in note


def test_serve_refuses_a_bad_worker_count_and_a_busy_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(skeleton_config(9)))
    assert main(["serve", "-c", str(path), "--workers", "none"]) != 0
    assert "--workers must be a positive integer or 'auto'" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "-c", str(path), "--workers", "2", "--port", str(port)]) != 0
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_serve_and_a_worker_say_the_same_when_a_valid_config_cannot_be_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = skeleton_config(9)
    # Valid YAML and schema; only building the judge finds its prompt file missing.
    config["routes"]["judged"] = {
        "type": "llm_classifier",
        "mode": "escalation",
        "classifier_target": "capable",
        "strong_target": "capable",
        "weak_target": "efficient",
        "prompt_file": "missing-prompt.txt",
    }
    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["serve", "-c", str(path)]) == 1
    served = capsys.readouterr().err
    assert f"error: cannot build {path}:\n  " in served and "missing-prompt.txt" in served
    # The worker fails before it touches its descriptors; it ignores SIGHUP (the supervisor's).
    before = signal.getsignal(signal.SIGHUP)
    try:
        code = worker.main(["-c", str(path), "--listen-fd", "-1", "--status-fd", "-1", "--life-fd", "-1"])
    finally:
        signal.signal(signal.SIGHUP, before)
    assert code == 1
    assert capsys.readouterr().err == served
