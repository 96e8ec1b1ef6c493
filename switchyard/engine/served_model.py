"""Which model the upstream says it served, against the one the router chose.

Layer: ``engine``.

Providers and gateways that silently substitute a default model (an unknown name mapped to a
fallback, a deployment pointing elsewhere) are a known failure of routers: the decision record
would name the chosen model while another one answered. Every answer's ``model`` field (the
JSON body's, or the first stream event's) goes into the record as ``served_model``, and a
mismatch sets ``model_mismatch`` (counted in ``/metrics`` as ``switchyard_model_mismatches``).

The rule (:func:`same_model`), which tolerates the aliasing providers document:

* ids are compared case-insensitively;
* a leading ``org/`` path is ignored on either side (``nvidia/Model`` and ``Model``; vLLM
  answers with the served model name it was given, gateways often add or strip the org);
* the answer may add a dated snapshot suffix to the id asked for: ``-YYYYMMDD``
  (Anthropic: ``claude-sonnet-4-5`` → ``claude-sonnet-4-5-20250929``), ``-YYYY-MM-DD``
  (OpenAI: ``gpt-4o`` → ``gpt-4o-2024-08-06``) or ``@YYYYMMDD`` (Vertex AI);
* an id asked for with ``-latest`` matches any dated snapshot of the same base name;
* an answer without a ``model`` says nothing, and is no mismatch.
"""

from __future__ import annotations

import re

from switchyard.engine.records import DecisionRecord

_SNAPSHOT = re.compile(r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8})$")


def _bare(model: str) -> str:
    return model.strip().lower().rsplit("/", 1)[-1]


def same_model(chosen: str, served: str) -> bool:
    """Whether ``served`` (the upstream's ``model``) names the model ``chosen`` was asking for."""
    if served == chosen:
        return True  # the usual answer: vLLM and most providers echo the id they were sent
    asked, answered = _bare(chosen), _bare(served)
    if not answered or asked == answered:
        return True
    base = _SNAPSHOT.sub("", answered)
    if base == asked:
        return True
    return asked.endswith("-latest") and base != answered and base == asked.removesuffix("-latest")


def note(record: DecisionRecord, served: str | None) -> None:
    """Records the upstream's ``model`` and whether it differs from ``record.selected_model``."""
    if not served:
        return
    record.served_model = served
    record.model_mismatch = record.selected_model is not None and not same_model(record.selected_model, served)
