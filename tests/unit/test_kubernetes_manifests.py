"""deploy/kubernetes: every manifest validates offline against Kubernetes' own schemas
(kubernetes-validate ships them), the kustomization lists exactly the manifests there, and the
pieces agree with each other and with the proxy (config, drain, probes, ports, keys)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from switchyard.config.load import load_config
from switchyard.server.runner import DRAIN_GRACE_S

kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate (in the dev extra)")

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def documents() -> dict[str, list[dict[str, Any]]]:
    return {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(DEPLOY.glob("*.yaml"))}


def resources() -> list[dict[str, Any]]:
    docs = documents()
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    return [d for name in listed for d in docs[name]]


def find(kind: str, name: str) -> dict[str, Any]:
    for doc in resources():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise AssertionError(f"no {kind} {name} in the kustomization's resources")


def test_kustomization_lists_every_manifest_and_nothing_else() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    manifests = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(manifests)
    assert [i["name"] for i in kustomization["images"]] == ["switchyard"]


@pytest.mark.parametrize("name", sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml"))
def test_manifest_validates_strictly(name: str) -> None:
    version = kv.latest_version()
    for doc in documents()[name]:
        kv.validate(doc, version, strict=True)


def test_the_validator_rejects_a_broken_manifest() -> None:
    broken = copy.deepcopy(find("Deployment", "switchyard"))
    broken["spec"]["replicas"] = "three"
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, kv.latest_version(), strict=True)
    unknown = copy.deepcopy(find("Deployment", "switchyard"))
    unknown["spec"]["template"]["spec"]["containers"][0]["readynessProbe"] = {}
    with pytest.raises(kv.ValidationError):
        kv.validate(unknown, kv.latest_version(), strict=True)


def _config() -> tuple[dict[str, Any], Any]:
    text = find("ConfigMap", "switchyard-config")["data"]["router.yaml"]
    secret = find("Secret", "switchyard-keys")["stringData"]
    return secret, load_config(yaml.safe_load(text), env=dict(secret))


def test_the_config_map_is_a_valid_router_config_with_redis_state_and_keys_from_the_secret() -> None:
    secret, loaded = _config()
    state = loaded.config.state
    assert state.backend == "redis"
    redis_service = find("Service", "switchyard-redis")
    assert urlparse(state.url).hostname == redis_service["metadata"]["name"]
    assert urlparse(state.url).port == redis_service["spec"]["ports"][0]["port"]
    needed = {k.key_env for k in loaded.config.server.api_keys if k.key_env}
    needed |= {c.api_key_env for c in loaded.config.llm_clients.values() if c.api_key_env}
    assert needed <= set(secret)
    container = find("Deployment", "switchyard")["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "switchyard-keys"}}]


def test_termination_grace_covers_pre_stop_drain_and_backstop() -> None:
    _, loaded = _config()
    pod = find("Deployment", "switchyard")["spec"]["template"]["spec"]
    pre_stop = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + loaded.config.server.drain_s + DRAIN_GRACE_S


def test_probes_ports_annotations_and_selectors_agree() -> None:
    deployment = find("Deployment", "switchyard")
    template = deployment["spec"]["template"]
    container = template["spec"]["containers"][0]
    port = container["ports"][0]["containerPort"]
    assert f"--port={port}" in container["args"] and "--host=0.0.0.0" in container["args"]
    assert "--config=/etc/switchyard/router.yaml" in container["args"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    assert mount["mountPath"] == "/etc/switchyard"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(port)
    assert annotations["prometheus.io/path"] == "/metrics"
    labels = template["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert find("Service", "switchyard")["spec"]["selector"].items() <= labels.items()
    assert find("PodDisruptionBudget", "switchyard")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    hpa = find("HorizontalPodAutoscaler", "switchyard")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "switchyard"}
    assert hpa["minReplicas"] >= 2  # the PDB's maxUnavailable: 1 leaves one serving
