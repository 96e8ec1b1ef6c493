"""Parsing a ``vllm serve`` command line the way vLLM's own parser reads it.

Layer: ``serving`` — standard library only.

Handled forms (vLLM's ``FlexibleArgumentParser`` accepts all of them):

- ``--flag value`` and ``--flag=value``; ``_`` and ``-`` are interchangeable in flag names;
- boolean switches (``--enable-prefix-caching``) and their negations (``--no-enable-prefix-caching``);
- JSON-valued flags (``--speculative-config '{"model": "…"}'``) and the dotted form that sets one
  key at a time (``--speculative_config.model …``, ``--speculative-config.num_speculative_tokens 3``,
  list items with ``key+``);
- leading ``NAME=value`` environment assignments, ``env``, ``python -m
  vllm.entrypoints.openai.api_server`` and ``docker run … vllm/vllm-openai …`` launchers;
- backslash line continuations and ``#`` comments, so a rendered command with its reason
  comments parses as it is.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass

#: Switches that never take a value (``store_true`` or ``BooleanOptionalAction`` in vLLM).
BOOLEAN_FLAGS = frozenset(
    {
        "async-scheduling",
        "disable-custom-all-reduce",
        "disable-fastapi-docs",
        "disable-frontend-multiprocessing",
        "disable-log-requests",
        "disable-log-stats",
        "disable-uvicorn-access-log",
        "enable-auto-tool-choice",
        "enable-chunked-prefill",
        "enable-expert-parallel",
        "enable-force-include-usage",
        "enable-log-requests",
        "enable-lora",
        "enable-mamba-cache-stochastic-rounding",
        "enable-prefix-caching",
        "enable-prompt-tokens-details",
        "enable-reasoning",
        "enable-request-id-headers",
        "enable-return-routed-experts",
        "enable-server-load-tracking",
        "enable-sleep-mode",
        "enable-tokenizer-info-endpoint",
        "enforce-eager",
        "exclude-tools-when-tool-choice-none",
        "headless",
        "skip-tokenizer-init",
        "trust-remote-code",
        "use-replayssm",
    }
)

#: Flags whose value is a JSON object (and that accept the dotted ``--flag.key value`` form).
JSON_FLAGS = frozenset(
    {
        "compilation-config",
        "default-chat-template-kwargs",
        "hf-overrides",
        "kv-events-config",
        "kv-transfer-config",
        "limit-mm-per-prompt",
        "override-generation-config",
        "reasoning-config",
        "speculative-config",
        "structured-outputs-config",
    }
)

#: Flags that take one or more values (``nargs="+"``).
MULTI_VALUE_FLAGS = frozenset(
    {"served-model-name", "lora-modules", "middleware", "allowed-origins", "allowed-methods", "allowed-headers"}
)

#: Short aliases vLLM defines for long flags.
SHORT_ALIASES = {
    "tp": "tensor-parallel-size",
    "pp": "pipeline-parallel-size",
    "dp": "data-parallel-size",
    "q": "quantization",
    "ep": "enable-expert-parallel",
}

#: Old top-level flags that now live inside ``--speculative-config`` (folded in when seen).
_LEGACY_SPECULATIVE = {"speculative-model": "model", "num-speculative-tokens": "num_speculative_tokens"}

_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_DOCKER_VALUE_OPTS = frozenset(
    {"-v", "--volume", "-p", "--publish", "--name", "--ipc", "--gpus", "--shm-size", "--network", "--entrypoint", "-w"}
)


@dataclass(slots=True)
class ServeCommand:
    """A parsed ``vllm serve`` command.

    Attributes:
        model: The model (positional argument or ``--model``), if any.
        options: Flag name (long form, dashes, no leading ``--``) → value; ``True``/``False``
            for switches and their ``--no-`` negations. The last occurrence wins, as in argparse.
        json_options: JSON-valued flags merged from their JSON and dotted forms.
        env: Environment assignments in front of the command (and ``docker -e``).
        repeated: Flags given more than once, with every value in order.
        problems: What could not be parsed (invalid JSON, no ``vllm serve`` in the text).
        launcher: ``vllm serve``, ``api_server``, ``docker`` or ``""`` when none was found.
        extra_positionals: Positional words vLLM would reject.
    """

    model: str | None = None
    options: dict[str, str | bool] = field(default_factory=dict)
    json_options: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    repeated: dict[str, list[str | bool]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    launcher: str = ""
    extra_positionals: list[str] = field(default_factory=list)

    def has(self, name: str) -> bool:
        """Whether ``--name`` (or its ``--no-`` form, or a dotted key of it) was given."""
        return name in self.options or name in self.json_options

    def value(self, name: str) -> str | None:
        """The string value of ``--name``, or ``None`` when absent or a switch."""
        found = self.options.get(name)
        return found if isinstance(found, str) else None

    def int_value(self, name: str) -> int | None:
        """The integer value of ``--name``, or ``None`` when absent or not an integer."""
        raw = self.value(name)
        if raw is None:
            return None
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            return None

    def enabled(self, name: str, default: bool = False) -> bool:
        """The state of a switch: given → ``True``, ``--no-`` form → ``False``, absent → ``default``."""
        found = self.options.get(name)
        if found is None:
            return default
        if isinstance(found, bool):
            return found
        return found.strip().lower() in ("1", "true", "yes", "on")

    def explicitly_disabled(self, name: str) -> bool:
        """Whether the command turns ``name`` off explicitly (``--no-name`` or ``--name false``)."""
        return name in self.options and not self.enabled(name, default=True)

    def json(self, name: str) -> dict[str, Any]:
        """The merged JSON object of a JSON-valued flag (``{}`` when absent or not an object)."""
        found = self.json_options.get(name)
        return found if isinstance(found, dict) else {}


def normalise_flag(raw: str) -> str:
    """``--Speculative_Config`` → ``speculative-config`` (the part before a dot only)."""
    name = raw.lstrip("-")
    head, dot, tail = name.partition(".")
    head = head.replace("_", "-").lower()
    if raw.startswith("-") and not raw.startswith("--"):
        head = SHORT_ALIASES.get(head, head)
    return head + dot + tail


def split_command(text: str) -> list[str]:
    """Shell words of ``text`` with comments and line continuations removed (quotes respected)."""
    return shlex.split(_strip_comments(text))


def _strip_comments(text: str) -> str:
    # A '#' starts a comment only at the start of a word and outside quotes, as in the shell;
    # a backslash before a newline joins the lines.
    out: list[str] = []
    quote = ""
    i = 0
    at_word_start = True
    while i < len(text):
        ch = text[i]
        if quote:
            out.append(ch)
            if ch == "\\" and quote == '"' and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = ""
            i += 1
            continue
        if ch == "\\" and i + 1 < len(text):
            if text[i + 1] == "\n":
                out.append(" ")
            else:
                out.append(text[i : i + 2])
            i += 2
            at_word_start = False
            continue
        if ch == "#" and at_word_start:
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        if ch in "'\"":
            quote = ch
        out.append(ch)
        at_word_start = ch.isspace()
        i += 1
    return "".join(out)


def _set_path(target: dict[str, Any], path: list[str], value: Any) -> None:
    node = target
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    leaf = path[-1]
    if leaf.endswith("+"):
        leaf = leaf[:-1]
        items = node.get(leaf)
        if not isinstance(items, list):
            items = node[leaf] = []
        if isinstance(value, str) and "," in value:
            items.extend(_scalar(v) for v in value.split(","))
        else:
            items.append(value)
    else:
        node[leaf] = value


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _scalar(raw: str) -> Any:
    """A dotted-form value: JSON when it parses (numbers, booleans, objects), else the string."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _find_args(words: list[str], cmd: ServeCommand) -> list[str] | None:
    """Strips the launcher and environment assignments; returns vLLM's own arguments."""
    i = 0
    while i < len(words) and (words[i] == "env" or _ENV_ASSIGN.match(words[i])):
        if words[i] != "env":
            key, _, value = words[i].partition("=")
            cmd.env[key] = value
        i += 1
    for j in range(i, len(words) - 1):
        if words[j].rsplit("/", 1)[-1] == "vllm" and words[j + 1] == "serve":
            cmd.launcher = "vllm serve"
            return words[j + 2 :]
    for j in range(i, len(words)):
        if words[j] == "vllm.entrypoints.openai.api_server":
            cmd.launcher = "api_server"
            return words[j + 1 :]
    if i < len(words) and words[i] in ("docker", "podman"):
        j = i + 1
        while j < len(words):
            word = words[j]
            if word in ("-e", "--env") and j + 1 < len(words):
                key, _, value = words[j + 1].partition("=")
                cmd.env[key] = value
                j += 2
                continue
            if word in _DOCKER_VALUE_OPTS:
                j += 2
                continue
            if not word.startswith("-") and "vllm" in word and word not in ("run",):
                cmd.launcher = "docker"
                return words[j + 1 :]
            j += 1
    return None


def parse_serve_command(text: str | list[str]) -> ServeCommand:
    """Parses a ``vllm serve`` command line (a string as typed in a shell, or its words).

    Never raises for bad input: what cannot be understood is listed in ``problems``.
    """
    cmd = ServeCommand()
    try:
        words = split_command(text) if isinstance(text, str) else list(text)
    except ValueError as exc:
        cmd.problems.append(f"cannot split the command into shell words: {exc}")
        return cmd
    args = _find_args(words, cmd)
    if args is None:
        cmd.problems.append("no `vllm serve` (or vLLM api_server / vllm-openai image) found in the command")
        return cmd
    dotted: list[tuple[str, list[str], Any]] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or word == "-":
            if cmd.model is None:
                cmd.model = word
            else:
                cmd.extra_positionals.append(word)
            continue
        name, value, i = _read_flag(word, args, i)
        if name.startswith("no-") and value is True:
            name, value = name[3:], False
        if "." in name:
            head, _, tail = name.partition(".")
            dotted.append((head, tail.split("."), _scalar(value) if isinstance(value, str) else value))
            continue
        if name == "model" and isinstance(value, str):
            cmd.model = value
            continue
        if name in cmd.options:
            cmd.repeated.setdefault(name, [cmd.options[name]]).append(value)
        cmd.options[name] = value
        if name in JSON_FLAGS and isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError as exc:
                cmd.problems.append(f"--{name}: invalid JSON ({exc.args[0] if exc.args else exc})")
                continue
            previous = cmd.json_options.get(name)
            if isinstance(parsed, dict) and isinstance(previous, dict):
                parsed = _merge(previous, parsed)
            cmd.json_options[name] = parsed
        elif name in _LEGACY_SPECULATIVE:
            dotted.append(("speculative-config", [_LEGACY_SPECULATIVE[name]], _scalar(str(value))))
    for head, path, leaf in dotted:
        current = cmd.json_options.get(head)
        if not isinstance(current, dict):
            current = cmd.json_options[head] = {}
        _set_path(current, path, leaf)
    return cmd


def _read_flag(word: str, args: list[str], i: int) -> tuple[str, str | bool, int]:
    """Name and value of the flag ``word`` (value words start at ``args[i]``); returns the next index."""
    raw_name, eq, attached = word.partition("=")
    name = normalise_flag(raw_name)
    if eq:
        return name, attached, i
    if name in BOOLEAN_FLAGS or (name.startswith("no-") and name[3:] in BOOLEAN_FLAGS):
        return name, True, i
    if name in MULTI_VALUE_FLAGS:
        values: list[str] = []
        while i < len(args) and not args[i].startswith("-"):
            values.append(args[i])
            i += 1
        return name, (" ".join(values) if values else True), i
    if i < len(args) and (not args[i].startswith("-") or _is_number(args[i])):
        return name, args[i], i + 1
    return name, True, i


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


__all__ = [
    "BOOLEAN_FLAGS",
    "JSON_FLAGS",
    "ServeCommand",
    "normalise_flag",
    "parse_serve_command",
    "split_command",
]
