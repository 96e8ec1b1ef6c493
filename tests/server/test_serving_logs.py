"""Serving ergonomics: the access log, the request path in decision records, count_tokens lines,
quiet third-party loggers under ``--log-level debug``, and ``serve --help``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _configs import skeleton_config
from _waits import wait_until

from switchyard.api import Switchyard
from switchyard.cli import build_parser
from switchyard.cli._common import setup_logging, uvicorn_level
from switchyard.engine.records import DecisionRecord
from switchyard.server.access_log import AccessLog, format_line
from switchyard.server.app import create_app
from switchyard.server.runner import AppThread


@pytest.fixture
def proxy(upstream: Any) -> Iterator[tuple[AppThread, list[DecisionRecord]]]:
    sy = Switchyard.from_config(skeleton_config(upstream.port))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    with AppThread(AccessLog(create_app(sy))) as server:
        yield server, records
    sy.close()


def _chat(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}


def _access(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "switchyard.access"]


def test_access_log_one_line_per_request(proxy: Any, caplog: pytest.LogCaptureFixture) -> None:
    server, _ = proxy
    root = server.root_url
    with caplog.at_level(logging.INFO, logger="switchyard.access"):
        assert httpx.post(f"{root}/v1/chat/completions", json=_chat("fast"), timeout=10).status_code == 200
        with httpx.stream("POST", f"{root}/v1/chat/completions", json=_chat("mix", stream=True), timeout=10) as r:
            r.read()
        body = {"model": "fast", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"{root}/v1/messages?beta=true", json=body, timeout=10).status_code == 200
        assert httpx.post(f"{root}/v1/chat/completions", json=_chat("ghost"), timeout=10).status_code == 404
        assert httpx.get(f"{root}/health", timeout=10).status_code == 200
        # A line is written after the last byte was handed to the server, so the client can
        # see the response a moment before its line exists: wait for it (bounded).
        wait_until(lambda: len(_access(caplog)) >= 5, 15, "five access lines", every=0.01)
    lines = _access(caplog)
    assert len(lines) == 5, lines
    assert lines[0].startswith("POST /v1/chat/completions route=fast status=200 model=efficient overhead_ms=")
    assert lines[1].startswith("POST /v1/chat/completions route=mix status=200 model=")  # logged at stream end
    assert lines[2].startswith("POST /v1/messages?beta=true route=fast status=200 model=efficient")
    assert lines[3].startswith("POST /v1/chat/completions route=- status=404 model=- overhead_ms=-")
    assert lines[4].startswith("GET /health route=- status=200")
    assert all("duration_ms=" in line for line in lines)


def test_format_line_when_nothing_was_sent() -> None:
    line = format_line("POST", "/v1/responses", None, {}, 1.25)
    assert line == "POST /v1/responses route=- status=- model=- overhead_ms=- duration_ms=1.2"


def test_decision_record_carries_path_and_count_tokens_is_logged(proxy: Any, caplog: pytest.LogCaptureFixture) -> None:
    server, records = proxy
    root = server.root_url
    body = {"model": "fast", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    with caplog.at_level(logging.INFO, logger="switchyard.count_tokens"):
        assert httpx.post(f"{root}/v1/messages", json=body, timeout=10).status_code == 200
        assert httpx.post(f"{root}/v1/responses", json={"model": "fast", "input": "hi"}, timeout=10).status_code == 200
        counted = httpx.post(f"{root}/v1/messages/count_tokens", json=body, timeout=10)
    assert counted.status_code == 200
    assert [r.path for r in records] == ["/v1/messages", "/v1/responses"]  # a count writes no record
    assert records[0].to_dict()["path"] == "/v1/messages"
    lines = [r.getMessage() for r in caplog.records if r.name == "switchyard.count_tokens"]
    assert len(lines) == 1
    assert lines[0].startswith("/v1/messages/count_tokens route=fast target=efficient status=200 counted_by=")


def test_library_calls_have_no_path(upstream: Any) -> None:
    sy = Switchyard.from_config(skeleton_config(upstream.port))
    try:
        record = sy.decide_sync(model="fast", messages=[{"role": "user", "content": "hi"}])
    finally:
        sy.close()
    assert record.path is None


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    chatty = {n: logging.getLogger(n).level for n in ("httpcore", "httpx", "uvicorn")}
    flags = (logging._srcfile, logging.logThreads, logging.logProcesses, logging.logMultiprocessing)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    logging._srcfile, logging.logThreads, logging.logProcesses, logging.logMultiprocessing = flags
    for name, level in chatty.items():
        logging.getLogger(name).setLevel(level)


def test_debug_keeps_third_party_loggers_quiet(restore_logging: None) -> None:
    logging.getLogger().handlers.clear()
    setup_logging("debug")
    # Our loggers set no level of their own, so they follow the root (other tests may have
    # tuned switchyard.* loggers in this process; a fresh child shows the configured default).
    assert logging.getLogger().level == logging.DEBUG
    assert logging.getLogger("switchyard_firsthour_probe").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("httpcore.connection").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("httpx").isEnabledFor(logging.DEBUG)
    assert uvicorn_level("debug") == "info"


def test_debug_all_shows_everything(restore_logging: None) -> None:
    logging.getLogger().handlers.clear()
    for name in ("httpcore", "httpx"):
        logging.getLogger(name).setLevel(logging.NOTSET)
    setup_logging("debug-all")
    assert logging.getLogger("httpcore.connection").isEnabledFor(logging.DEBUG)
    assert uvicorn_level("debug-all") == "debug"


def test_serve_help_lists_every_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    text = capsys.readouterr().out
    for needle in (
        "/v1/chat/completions",
        "/v1/messages ",
        "/v1/messages/count_tokens",
        "/v1/responses",
        "/v1/models",
        "/health",
        "/v1/stats",
        "docs/agents.md",
        "--access-log",
    ):
        assert needle in text, needle


def test_cli_log_records_skip_the_fields_its_format_never_shows(restore_logging: None) -> None:
    # One decision line per request: no stack walk for the caller, no thread or process lookup.
    setup_logging("info")
    record = logging.getLogger("switchyard.decisions").makeRecord("x", logging.INFO, "(unknown file)", 0, "m", (), None)
    assert record.thread is None and record.process is None and record.processName is None
    assert logging._srcfile is None  # Logger._log then skips findCaller


def test_serve_freezes_what_start_up_built(
    tmp_path: Any, upstream: Any, monkeypatch: pytest.MonkeyPatch, restore_logging: None
) -> None:
    import gc

    import yaml

    from switchyard.cli import main
    from switchyard.cli import serve as serve_cmd
    from switchyard.server import runner

    seen: list[tuple[int, bool]] = []
    building: list[bool] = []
    build = serve_cmd.build_or_fail

    def watched_build(*a: Any, **k: Any) -> Any:
        building.append(gc.isenabled())
        return build(*a, **k)

    monkeypatch.setattr(serve_cmd, "build_or_fail", watched_build)
    monkeypatch.setattr(runner, "serve_socket", lambda *a, **k: seen.append((gc.get_freeze_count(), gc.isenabled())))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(skeleton_config(upstream.port)))
    gc.unfreeze()
    try:
        assert main(["serve", "-c", str(config), "--port", "0"]) == 0
    finally:
        gc.unfreeze()
    assert building == [False]  # start-up runs without the collector ...
    assert seen and seen[0][0] > 0  # ... and the collector no longer walks the modules and config while serving
    assert seen[0][1] and gc.isenabled()  # but collects what serving leaves behind


def test_a_serve_that_fails_at_start_up_leaves_the_collector_on(tmp_path: Any) -> None:
    import gc

    from switchyard.cli import main

    assert main(["serve", "-c", str(tmp_path / "missing.yaml")]) != 0
    assert gc.isenabled()
