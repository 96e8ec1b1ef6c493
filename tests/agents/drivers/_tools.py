"""The two tools every framework driver gives its agent, as plain functions, plus the CLI."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path


def write_file(path: str, content: str) -> str:
    """Write content to the file at path (creating it), and say how many bytes were written.

    Args:
        path: Absolute path of the file.
        content: The text to write.
    """
    Path(path).write_text(content)
    return f"wrote {len(content.encode())} bytes to {path}"


def shell(command: str) -> str:
    """Run a shell command and return what it printed (stdout and stderr).

    Args:
        command: The command line, run by bash.
    """
    done = subprocess.run(["bash", "-lc", command], capture_output=True, text=True, timeout=30)
    return (done.stdout + done.stderr).strip() or f"(exit {done.returncode}, no output)"


TOOLS = {"write_file": write_file, "shell": shell}


def cli(apis: tuple[str, ...]) -> argparse.Namespace:
    """``--base-url URL --model NAME [--api API] PROMPT``."""
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True, help="the proxy's OpenAI base URL (.../v1)")
    p.add_argument("--model", required=True, help="the route name")
    p.add_argument("--api", choices=apis, default=apis[0])
    p.add_argument("prompt")
    return p.parse_args()


def root(base_url: str) -> str:
    """The server root (what Anthropic clients want) of an OpenAI-style ``.../v1`` URL."""
    return base_url.removesuffix("/").removesuffix("/v1")


def final(text: str) -> None:
    """Prints the agent's final answer where the test looks for it."""
    print(f"FINAL ANSWER: {text}", flush=True)
