"""Serving the efficient model: validated vLLM launch commands for Nemotron 3.5 Lightning.

Layer: ``serving`` — pure (standard library only); it knows vLLM's command line, not HTTP.

- :mod:`switchyard.serving.vllm_args` parses a ``vllm serve`` command line.
- :mod:`switchyard.serving.vllm_profiles` holds the GPU table and the per-profile recipes and
  renders a ready command (``switchyard vllm-command --profile …``).
- :mod:`switchyard.serving.vllm_rules` is the rule table behind ``switchyard vllm-command --check``;
  :mod:`switchyard.serving.vllm_findings` holds its rule/finding/report types and
  :mod:`switchyard.serving.vllm_facts` the facts the rules derive from a command.
"""

from switchyard.serving.vllm_args import ServeCommand, parse_serve_command
from switchyard.serving.vllm_findings import CheckReport, Finding, Rule
from switchyard.serving.vllm_profiles import (
    GPUS,
    PROFILES,
    SERVED_MODEL_NAME,
    Gpu,
    Profile,
    ServeSpec,
    build_command,
)
from switchyard.serving.vllm_rules import RULES, check_command

__all__ = [
    "GPUS",
    "PROFILES",
    "RULES",
    "SERVED_MODEL_NAME",
    "CheckReport",
    "Finding",
    "Gpu",
    "Profile",
    "Rule",
    "ServeCommand",
    "ServeSpec",
    "build_command",
    "check_command",
    "parse_serve_command",
]
