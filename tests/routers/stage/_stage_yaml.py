"""The stage-router config the YAML-key tests extend: two tiers over a client nothing answers."""

from __future__ import annotations

import textwrap
from pathlib import Path

from switchyard.config.load import LoadedConfig, load_config

BASE = """\
llm_clients:
  local: {format: openai_chat, base_url: "http://127.0.0.1:9/v1"}
targets:
  lightning: {client: local, model: lightning}
  frontier: {client: local, model: frontier}
routes:
  agent:
    type: stage_router
    capable: frontier
    efficient: lightning
"""


def load(tmp_path: Path, extra: str = "") -> LoadedConfig:
    """:data:`BASE` with ``extra`` (YAML keys of route ``agent``) added, written and loaded."""
    path = tmp_path / "router.yaml"
    path.write_text(BASE + textwrap.indent(textwrap.dedent(extra), "    "))
    return load_config(path)
