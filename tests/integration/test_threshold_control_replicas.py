"""Two ``switchyard serve`` replicas sharing one real redis-server hold one controlled threshold.

A ``prefill_probe`` route with ``threshold: {target_capable_share: 0.3}`` over features from a
fake embeddings server; requests alternate between the replicas. Each replica's controller
reads the merged window back from Redis, so both report the decisions of both, and the
threshold moves on both (``/v1/stats`` and the ``switchyard_route_threshold`` gauge).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml
from _configs import skeleton_config
from _redis import RedisServer
from prometheus_client.parser import text_string_to_metric_families
from test_replicas_redis import Replica

np = pytest.importorskip("numpy")

from switchyard.protocol.features import FeatureRecipe  # noqa: E402
from switchyard.routers.learned import checkpoint as ckpt  # noqa: E402
from switchyard.testing import FakeModel, FakeUpstream, serve_fake  # noqa: E402
from switchyard.testing.fake_features import FakeFeatureServer  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WORDS = [f"w{i}" for i in range(200)]
START = 0.5


def checkpoint(path: Path) -> None:
    """A probe on 32-wide hashed embeddings: P(efficient), P(capable) = sigmoid of two fixed
    random projections (every word moves the score, so scores spread)."""
    dim = 32
    comps = (np.random.default_rng(0).standard_normal((2, dim)) * 3.0).astype(np.float32)
    transform = ckpt.Transform(np.zeros(dim, np.float32), np.ones(dim, np.float32), np.zeros(dim, np.float32), comps)
    member = ckpt.Member(hidden=[], output=(np.eye(2, dtype=np.float32), np.zeros(2, np.float32)))
    recipe = FeatureRecipe(source="embeddings", model="toy-emb", hidden_size=dim)
    cp = ckpt.Checkpoint("prefill_probe", ["efficient", "capable"], recipe, transform, [member])
    ckpt.save(cp, path)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, Replica, RedisServer]]:
    workdir = tmp_path_factory.mktemp("control")
    server = RedisServer(workdir).start()
    fake = serve_fake(FakeUpstream([FakeModel("fake-efficient"), FakeModel("fake-capable")]))
    features = serve_fake(FakeFeatureServer(hidden_states_dir=workdir / "hs", embedding_dim=32))
    checkpoint(workdir / "probe")
    config = skeleton_config(fake.port)
    config["routes"]["learned"] = {
        "type": "prefill_probe",
        "targets": ["efficient", "capable"],
        "capable": "capable",
        "checkpoint": str(workdir / "probe"),
        "features": {"backend": "embeddings", "base_url": f"http://127.0.0.1:{features.port}/v1", "model": "toy-emb"},
        "cache_size": 0,
        "threshold": {"target_capable_share": 0.3, "start": START, "warmup": 4, "window": 16, "sync_every": 4},
    }
    config["state"] = {"backend": "redis", "url": server.url, "timeout_s": 2.0, "retry_interval_s": 0.2}
    path = workdir / "router.yaml"
    path.write_text(yaml.safe_dump(config))
    replicas: list[Replica] = []
    try:
        replicas.append(Replica(path, workdir, "a"))
        replicas.append(Replica(path, workdir, "b"))
        yield replicas[0], replicas[1], server
    finally:
        for replica in replicas:
            replica.stop()
        server.stop()
        features.stop()
        fake.stop()


def control(replica: Replica) -> dict[str, Any]:
    stats = httpx.get(f"{replica.url}/v1/stats", timeout=5).json()
    return dict(stats["threshold_control"]["learned"])


def gauge(replica: Replica) -> float:
    for family in text_string_to_metric_families(httpx.get(f"{replica.url}/metrics", timeout=5).text):
        for sample in family.samples:
            if sample.name == "switchyard_route_threshold" and sample.labels == {"route": "learned"}:
                return float(sample.value)
    raise AssertionError("switchyard_route_threshold{route='learned'} is missing")


def test_both_replicas_move_one_shared_threshold(stack: Any) -> None:
    a, b, server = stack
    assert control(a)["threshold"] == control(b)["threshold"] == START
    rng = random.Random(3)
    for n in range(48):
        replica = (a, b)[n % 2]
        prompt = " ".join(rng.sample(WORDS, 6))
        response = httpx.post(
            f"{replica.url}/v1/chat/completions",
            json={"model": "learned", "messages": [{"role": "user", "content": prompt}]},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        assert response.headers["x-switchyard-decision-source"] == "probe"
    raw = redis.Redis.from_url(server.url).get("switchyard:learned:~threshold-control")
    assert raw is not None
    shared = json.loads(raw)
    assert shared["seen"] == 48  # every decision of both replicas, written in batches of 4
    ca, cb = control(a), control(b)
    # each replica has read the other's decisions back: more than the 24 it decided itself
    assert ca["seen"] > 24 and cb["seen"] > 24
    assert ca["syncs"] == cb["syncs"] == 6
    assert ca["threshold"] != START and cb["threshold"] != START
    assert abs(ca["threshold"] - cb["threshold"]) < 0.05
    assert gauge(a) == pytest.approx(ca["threshold"]) and gauge(b) == pytest.approx(cb["threshold"])
