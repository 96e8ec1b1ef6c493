"""Serves scripted sessions through NVIDIA's own advisor gate (``nemo-switchyard`` 0.3.0).

Run by ``differential_advisor.py`` with the Python of a separate virtual environment that has
``pip install nemo-switchyard==0.3.0`` (its import package is also called ``switchyard``, so it
can never share an environment with ours). Imports nothing of this repository.

Input (JSON file): ``{"toml": config text, "sessions": [{"headers": {...}, "turns": [OpenAI Chat
body, ...]}]}``. Output (JSON file): ``{"version", "replies": [[[status, text, selected], ...]
per session]}``. Turns are sent one at a time, in order, to ``/v1/chat/completions``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> list[Any]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            payload = json.loads(resp.read())
            selected = resp.headers.get("x-model-router-selected-model")
            text = payload["choices"][0]["message"].get("content") or ""
            return [resp.status, text, selected]
    except urllib.error.HTTPError as exc:
        return [exc.code, exc.read().decode("utf-8", "replace")[:300], None]


def main() -> int:
    job = json.loads(Path(sys.argv[1]).read_text())
    from importlib.metadata import version

    from switchyard_rust.server import Server

    replies: list[list[list[Any]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "advisor.toml"
        path.write_text(job["toml"])
        with Server(str(path)) as server:
            url = server.base_url.rstrip("/") + "/v1/chat/completions"
            for session in job["sessions"]:
                replies.append([_post(url, body, session["headers"]) for body in session["turns"]])
    Path(sys.argv[2]).write_text(json.dumps({"version": version("nemo-switchyard"), "replies": replies}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
