"""Runs NVIDIA's own stage router (``nemo-switchyard`` wheel) over prepared requests.

Run by ``differential_stage_router.py`` with the Python of a separate virtual environment that
has ``pip install nemo-switchyard`` (its import package is also called ``switchyard``, so it can
never share an environment with ours). Imports nothing of this repository.

Input (JSON file): ``{"configs": [{"name", "picker", "threshold", "window", "tool_semantics",
"notes"}], "requests": [NVIDIA IR request dicts], "chat_bodies": [optional OpenAI Chat bodies
for the server cross-check]}``.
Output (JSON file): ``{"version", "results": {config name: [[tier, source, confidence, note], ...]},
"server": {config name: [tier, ...]}}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

MODELS = {"capable": ["capable-model"], "efficient": ["efficient-model"], "any": ["capable-model", "efficient-model"]}
TIER = {"capable-model": "capable", "efficient-model": "efficient"}


def _algorithm(cfg: dict[str, Any]) -> Any:
    from switchyard.libsy import algorithms

    kwargs: dict[str, Any] = {"picker": cfg["picker"], "confidence_threshold": cfg["threshold"]}
    if cfg.get("window") is not None:
        kwargs["recent_window"] = cfg["window"]
    if cfg.get("tool_semantics"):
        kwargs["tool_semantics"] = cfg["tool_semantics"]
    if cfg.get("notes"):
        kwargs["escalation_note"] = cfg["notes"]["escalation"]
        kwargs["deescalation_note"] = cfg["notes"]["deescalation"]
    return algorithms.stage_router(**kwargs)


def _last_note(request: dict[str, Any], notes: dict[str, str] | None) -> str | None:
    if not notes or not request.get("messages"):
        return None
    last = request["messages"][-1]
    texts = [b.get("text") for b in last.get("content", []) if b.get("type") == "text"]
    for text in texts[-1:]:
        if text in notes.values():
            return str(text)
    return None


async def _run(algorithm: Any, request: dict[str, Any], notes: dict[str, str] | None) -> list[Any]:
    from switchyard.libsy import Step

    async for step in algorithm.run_stream(request, MODELS):
        if isinstance(step, Step.Done):
            outcome = step.outcome
            evidence = (outcome.metadata.evidence if outcome.metadata else None) or {}
            tier = TIER[outcome.selected_model_ids[0]]
            return [tier, evidence.get("source"), evidence.get("confidence"), _last_note(outcome.request, notes)]
        raise RuntimeError(f"the stage router asked for a model call: {step!r}")
    raise RuntimeError("no outcome")


async def _run_all(configs: list[dict[str, Any]], requests: list[dict[str, Any]]) -> dict[str, list[Any]]:
    results: dict[str, list[Any]] = {}
    for cfg in configs:
        algorithm = _algorithm(cfg)
        results[cfg["name"]] = [await _run(algorithm, r, cfg.get("notes")) for r in requests]
    return results


def _server(configs: list[dict[str, Any]], bodies: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The same decisions through NVIDIA's own server and OpenAI Chat decoder (``/v1/decision``)."""
    from switchyard_rust.server import Server

    lines = [
        "schema_version = 1",
        "[llm_clients.local]",
        'format = "openai_chat"',
        'base_url = "http://127.0.0.1:9/v1"',
        "[targets.capable]",
        'id = "capable-model"',
        'llm_client = "local"',
        "[targets.efficient]",
        'id = "efficient-model"',
        'llm_client = "local"',
    ]
    for cfg in configs:
        lines += [
            f"[routes.{cfg['name']}]",
            f'id = "{cfg["name"]}"',
            'type = "stage_router"',
            'capable_target = "capable"',
            'efficient_target = "efficient"',
            f'picker = "{cfg["picker"]}"',
            f"confidence_threshold = {cfg['threshold']}",
        ]
    out: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stage.toml"
        path.write_text("\n".join(lines) + "\n")
        with Server(str(path)) as server:
            url = server.base_url.rstrip("/") + "/v1/decision"
            for cfg in configs:
                tiers = []
                for body in bodies:
                    payload = {"input_format": "openai_chat", "request": {**body, "model": cfg["name"]}}
                    req = urllib.request.Request(
                        url, data=json.dumps(payload).encode(), headers={"content-type": "application/json"}
                    )
                    with urllib.request.urlopen(req, timeout=10) as resp:
                        tiers.append(json.loads(resp.read())["selected"]["target"])
                out[cfg["name"]] = tiers
    return out


def main() -> int:
    job = json.loads(Path(sys.argv[1]).read_text())
    import switchyard

    results = asyncio.run(_run_all(job["configs"], job["requests"]))
    server = _server(job["server_configs"], job["chat_bodies"]) if job.get("chat_bodies") else {}
    Path(sys.argv[2]).write_text(
        json.dumps({"version": getattr(switchyard, "__version__", "?"), "results": results, "server": server})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
