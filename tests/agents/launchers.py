"""How each real agent is installed, configured and launched headless against a base URL.

Every launcher writes the agent's config into a throw-away ``home`` (never the user's), sets a
dummy API key and turns off telemetry, update checks and other network extras, so the only
traffic an agent makes is to the URL it is given. The commands are one-shot (``-p``, ``exec``,
``chat -q``) and bounded by the caller's timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PREFIX = Path(os.environ.get("SWITCHYARD_AGENTS_PREFIX", ROOT / ".agents"))
NODE_BIN = PREFIX / "node_modules" / ".bin"
PY_AGENTS = PREFIX / "py" / "bin" / "python"
HERMES_BIN = PREFIX / "hermes" / "bin" / "hermes"
DRIVERS = Path(__file__).resolve().parent / "drivers"
DUMMY_KEY = "sk-switchyard-agent-test"

# Pinned versions: what `make agents` installs (keep in sync with the Makefile).
VERSIONS = {
    "claude-code": "2.1.332",
    "codex": "0.171.0",
    "qwen-code": "0.24.4",
    "hermes": "0.19.0",
    "openai-agents": "0.24.0",
    "langchain-openai": "1.7.4",
    "langchain-anthropic": "1.7.10",
    "litellm": "1.110.2",
    "smolagents": "1.26.0",
    # The Anthropic SDKs' own tool runners (threaded turns, beta message-threads-2026-08-12).
    "anthropic-sdk-py": "2.15.0",
    "anthropic-sdk-js": "1.15.0",
}

_QUIET_ENV = {
    # Claude Code: no telemetry, error reports, auto-update or other non-essential traffic.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "IS_SANDBOX": "1",  # lets --dangerously-skip-permissions run as root in CI containers
    # Python SDKs / frameworks
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "ANONYMIZED_TELEMETRY": "False",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "npm_config_update_notifier": "false",
    "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
    "NO_COLOR": "1",
    "TERM": "dumb",
}


@dataclass(slots=True)
class Launch:
    """One agent run: the argv, its environment and working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    files: dict[Path, str] = field(default_factory=dict)

    def write_files(self) -> None:
        """Writes the agent's config files (into the throw-away home)."""
        for path, text in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def base_env(home: Path) -> dict[str, str]:
    """A minimal environment: PATH with node, HOME in ``home``, no proxies, no real keys."""
    path = os.pathsep.join([str(NODE_BIN), str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "TMPDIR": str(home / "tmp")}
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env["XDG_CACHE_HOME"] = str(home / ".cache")
    env["XDG_DATA_HOME"] = str(home / ".local" / "share")
    env.update(_QUIET_ENV)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def claude_code(root_url: str, model: str, prompt: str, home: Path, cwd: Path) -> Launch:
    """Claude Code in print mode (default mode, not ``--bare``), all tools allowed."""
    env = base_env(home)
    env.update({"ANTHROPIC_BASE_URL": root_url, "ANTHROPIC_API_KEY": DUMMY_KEY})
    # Side calls (title, quota) go to the small/fast model; route them through the same route name.
    env["ANTHROPIC_SMALL_FAST_MODEL"] = model
    env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] = model
    argv = [str(NODE_BIN / "claude"), "-p", prompt, "--model", model, "--dangerously-skip-permissions"]
    argv += ["--output-format", "json", "--max-turns", "8"]
    files = {home / ".claude.json": json.dumps({"hasCompletedOnboarding": True, "autoUpdates": False})}
    return Launch(argv, env, cwd, files)


def codex(base_url: str, model: str, prompt: str, home: Path, cwd: Path) -> Launch:
    """Codex ``exec`` with a custom ``wire_api = "responses"`` provider (the only wire API it has)."""
    env = base_env(home)
    env["CODEX_HOME"] = str(home / ".codex")
    env["SWITCHYARD_KEY"] = DUMMY_KEY
    config = f"""model = "{model}"
model_provider = "switchyard"
check_for_update_on_startup = false
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.switchyard]
name = "switchyard"
base_url = "{base_url}"
wire_api = "responses"
env_key = "SWITCHYARD_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

# Plugins make Codex fetch curated catalogues (github.com, chatgpt.com) at start-up.
[features]
plugins = false

[otel]
exporter = "none"
"""
    argv = [str(NODE_BIN / "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    argv += ["-C", str(cwd), prompt]
    return Launch(argv, env, cwd, {home / ".codex" / "config.toml": config})


def qwen_code(base_url: str, model: str, prompt: str, home: Path, cwd: Path) -> Launch:
    """Qwen Code headless (``-p``, ``--yolo``) with OpenAI-compatible auth (Chat Completions)."""
    env = base_env(home)
    env.update({"OPENAI_API_KEY": DUMMY_KEY, "OPENAI_BASE_URL": base_url, "OPENAI_MODEL": model})
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "model": {"name": model},
        # Shell commands through pipes, not node-pty: a PTY may report a fast command's exit
        # before its output is read (microsoft/node-pty#726), and on a busy machine Qwen Code's
        # `cat` of the file then returned nothing, breaking the loop for a reason not ours.
        "tools": {"shell": {"enableInteractiveShell": False}},
    }
    argv = [str(NODE_BIN / "qwen"), "-p", prompt, "--yolo", "--model", model]
    return Launch(argv, env, cwd, {home / ".qwen" / "settings.json": json.dumps(settings)})


def hermes(base_url: str, model: str, prompt: str, home: Path, cwd: Path, context_window: int = 131072) -> Launch:
    """Hermes Agent one-shot (``hermes chat -q``) on a ``model.provider: custom`` endpoint."""
    env = base_env(home)
    env["HERMES_HOME"] = str(home / ".hermes")
    env["HERMES_DISABLE_LAZY_INSTALLS"] = "1"
    env["OPENAI_API_KEY"] = DUMMY_KEY
    config = f"""model:
  provider: custom
  base_url: {base_url}
  default: {model}
  api_key: {DUMMY_KEY}
  context_length: {context_window}
security:
  tirith_enabled: false         # else Hermes downloads the tirith scanner from github.com
  allow_lazy_installs: false    # else Hermes pip-installs optional tool backends (edge-tts) at run time
"""
    # A fresh update-check cache: Hermes otherwise asks pypi.org for a newer version at start-up.
    fresh = json.dumps({"ts": time.time(), "behind": 0, "rev": None, "ver": VERSIONS["hermes"]})
    files = {home / ".hermes" / "config.yaml": config, home / ".hermes" / ".update_check": fresh}
    argv = [str(HERMES_BIN), "chat", "-q", prompt]
    return Launch(argv, env, cwd, files)


def python_driver(
    name: str, base_url: str, model: str, prompt: str, home: Path, cwd: Path, api: str | None = None
) -> Launch:
    """One of the Python framework drivers in ``tests/agents/drivers`` run in the agents' venv."""
    env = base_env(home)
    env.update({"OPENAI_API_KEY": DUMMY_KEY, "ANTHROPIC_API_KEY": DUMMY_KEY})
    argv = [
        str(PY_AGENTS),
        str(DRIVERS / f"drive_{name.replace('-', '_')}.py"),
        "--base-url",
        base_url,
        "--model",
        model,
        prompt,
    ]
    if api:
        argv[2:2] = ["--api", api]
    return Launch(argv, env, cwd)


def node_driver(name: str, base_url: str, model: str, prompt: str, home: Path, cwd: Path, api: str | None) -> Launch:
    """A Node driver in ``tests/agents/drivers`` (CommonJS) with the prefix's ``node_modules``."""
    env = base_env(home)
    env["NODE_PATH"] = str(PREFIX / "node_modules")
    env["ANTHROPIC_API_KEY"] = DUMMY_KEY
    script = DRIVERS / f"drive_{name.replace('-', '_')}.cjs"
    argv = ["node", str(script), "--base-url", base_url, "--model", model, "--api", api or "anthropic", prompt]
    return Launch(argv, env, cwd)


def installed(agent: str) -> bool:
    """Whether ``agent``'s binary (or venv, or package) is in the prefix."""
    if agent == "anthropic-sdk-js":
        return (PREFIX / "node_modules" / "@anthropic-ai" / "sdk" / "package.json").exists() and bool(
            shutil.which("node")
        )
    exe = {
        "claude-code": NODE_BIN / "claude",
        "codex": NODE_BIN / "codex",
        "qwen-code": NODE_BIN / "qwen",
        "hermes": HERMES_BIN,
    }.get(agent, PY_AGENTS)
    return exe.exists() and shutil.which("node" if exe.parent == NODE_BIN else str(exe)) is not None
