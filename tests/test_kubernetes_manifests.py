"""deploy/kubernetes/: every manifest valid against the Kubernetes schemas (offline, strict), and
what the manifests must agree on with each other, with the image (Dockerfile) and with the code:
read from the files and the code, not restated here."""

from __future__ import annotations

import copy
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml
from fastapi.routing import APIRoute

from sentient_assist.runtime.errors import SettingsError
from sentient_assist.server import routes
from sentient_assist.server.serving import BACKSTOP_SECONDS
from sentient_assist.server.settings import Settings, env_name, load_settings
from sentient_assist.version import __version__
from tests.support.server import Servers

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "kubernetes"
KUSTOMIZATION = "kustomization.yaml"
EXAMPLE_SECRET = "secret.example.yaml"
# The oldest Kubernetes the manifests are for (the preStop `sleep` action is on by default from
# 1.30) and the newest whose schemas kubernetes-validate ships; both named, never "latest".
VERSIONS = ("1.30.0", "1.37.0")
# Seconds between uvicorn's own deadline and the kubelet's SIGKILL: the process must exit.
EXIT_MARGIN_SECONDS = 5
SETTING_NAMES = {env_name(field) for field in Settings.model_fields}


def documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]


def manifest_files() -> list[str]:
    return sorted(
        path.name for path in K8S.iterdir() if path.suffix in (".yaml", ".yml") and path.name != KUSTOMIZATION
    )


def the(kind: str, files: list[str] | None = None) -> dict[str, Any]:
    """The one resource of `kind` among the kustomization's resources (or `files`)."""
    names = files if files is not None else documents(KUSTOMIZATION)[0]["resources"]
    (found,) = [doc for name in names for doc in documents(name) if doc["kind"] == kind]
    return found


def container() -> dict[str, Any]:
    (found,) = the("Deployment")["spec"]["template"]["spec"]["containers"]
    return found


def configmap_env() -> dict[str, str]:
    return {key: str(value) for key, value in the("ConfigMap")["data"].items()}


def final_stage() -> str:
    return (ROOT / "Dockerfile").read_text().split("\nFROM ")[-1]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection attempt fails the test: CI reaches no schema host."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("network access during offline validation")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", manifest_files())
def test_every_manifest_is_valid_against_the_kubernetes_schemas(offline: None, name: str, version: str) -> None:
    resources = documents(name)
    assert resources, f"{name} holds no resource"
    for resource in resources:
        # strict: a field the schema does not know (a typo) is an error, not silently dropped.
        validated = kubernetes_validate.validate(resource, version, strict=True)
        assert validated == version.rsplit(".", 1)[0]  # that version's schemas, not an older one's


def test_the_validator_rejects_a_misspelt_field_and_a_wrong_type(offline: None) -> None:
    deployment = the("Deployment")
    kubernetes_validate.validate(deployment, VERSIONS[-1], strict=True)
    misspelt = copy.deepcopy(deployment)
    misspelt["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/readyz"}}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(misspelt, VERSIONS[-1], strict=True)
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "ninety"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, VERSIONS[-1], strict=True)


def test_the_kustomization_lists_every_manifest_but_the_example_secret() -> None:
    (kustomization,) = documents(KUSTOMIZATION)
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    assert set(listed) == set(manifest_files()) - {EXAMPLE_SECRET}
    # No Secret is applied from the repository: its keys would be in git.
    assert not [doc for name in listed for doc in documents(name) if doc["kind"] == "Secret"]
    assert "secretGenerator" not in kustomization


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (its built-in kustomize) is not installed")
def test_kubectl_kustomize_renders_valid_manifests_with_the_versioned_image(offline: None) -> None:
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    resources = [doc for doc in yaml.safe_load_all(rendered) if doc]
    assert sorted(doc["kind"] for doc in resources) == sorted(
        doc["kind"] for name in manifest_files() if name != EXAMPLE_SECRET for doc in documents(name)
    )
    for resource in resources:
        kubernetes_validate.validate(resource, VERSIONS[-1], strict=True)
    (deployment,) = [doc for doc in resources if doc["kind"] == "Deployment"]
    (image,) = {c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    (kustomization,) = documents(KUSTOMIZATION)
    (override,) = kustomization["images"]
    assert image == f"{override['newName']}:{override['newTag']}"


def test_the_image_tag_is_this_checkouts_version() -> None:
    (kustomization,) = documents(KUSTOMIZATION)
    (override,) = kustomization["images"]
    assert override["name"] == container()["image"]  # the placeholder it replaces
    assert override["newTag"] == __version__


def test_termination_grace_covers_the_prestop_sleep_the_shutdown_grace_and_the_backstop() -> None:
    pod = the("Deployment")["spec"]["template"]["spec"]
    pre_stop = container()["lifecycle"]["preStop"]["sleep"]["seconds"]
    # That the service reads it as this number: test_the_configmap_settings_load_...
    grace = float(configmap_env()["ASSIST_SHUTDOWN_GRACE"])
    assert pre_stop > 0  # the endpoint leaves the load balancers before the pod stops accepting
    # The kubelet counts the preStop hook inside terminationGracePeriodSeconds.
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + grace + BACKSTOP_SECONDS + EXIT_MARGIN_SECONDS


def test_the_probes_are_the_apps_liveness_and_readiness_routes() -> None:
    # The probes' router, as create_app() includes it (no prefix); the server test below calls them.
    app_routes = {route.path: route.endpoint for route in routes.probes.routes if isinstance(route, APIRoute)}
    probes = container()
    assert app_routes[probes["livenessProbe"]["httpGet"]["path"]] is routes.healthz
    assert app_routes[probes["startupProbe"]["httpGet"]["path"]] is routes.healthz
    # The route that answers 503 while draining, not one that answers as long as the process lives.
    assert app_routes[probes["readinessProbe"]["httpGet"]["path"]] is routes.readyz
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert probes[probe]["httpGet"]["port"] in (probes["ports"][0]["name"], probes["ports"][0]["containerPort"])


def test_a_server_with_the_configmaps_settings_answers_the_probes_without_a_key(serve: Servers) -> None:
    key = "k8s-test-key-0123456789"
    env = configmap_env() | {"ASSIST_API_KEYS": key, "ASSIST_RESUME_SECRET": "k8s-test-resume-secret-0123456789"}
    with httpx.Client(base_url=serve(env).url, timeout=5) as client:
        # The kubelet sends no Authorization header; /assist does need one here.
        assert client.post("/assist", json={}).status_code == 401
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            response = client.get(container()[probe]["httpGet"]["path"])
            assert response.status_code == 200, (probe, response.text)
        assert client.get(container()["readinessProbe"]["httpGet"]["path"]).json() == {"status": "ready"}


def test_the_pod_runs_as_the_images_user_locked_down() -> None:
    user = re.search(r"^USER (\d+):(\d+)$", final_stage(), re.M)
    assert user is not None, "the Dockerfile's final stage names no numeric USER"
    pod = the("Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == tuple(
        int(n) for n in user.groups()
    )
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    security = container()["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    (tmp,) = [mount for mount in container()["volumeMounts"] if mount["mountPath"] == "/tmp"]
    (volume,) = [volume for volume in pod["volumes"] if volume["name"] == tmp["name"]]
    assert "emptyDir" in volume


def test_the_container_port_is_the_images_and_the_services() -> None:
    image = final_stage()
    exposed = re.search(r"^EXPOSE (\d+)$", image, re.M)
    image_port = re.search(r"\bASSIST_PORT=(\d+)", image)
    assert exposed is not None and image_port is not None
    (port,) = container()["ports"]
    env = {item["name"]: item.get("value") for item in container()["env"]}
    assert port["containerPort"] == int(exposed.group(1)) == int(image_port.group(1)) == int(env["ASSIST_PORT"])
    assert env["ASSIST_HOST"] == "0.0.0.0"  # reachable from the kubelet and the Service
    (service_port,) = the("Service")["spec"]["ports"]
    assert service_port["targetPort"] in (port["name"], port["containerPort"])
    annotations = the("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == port["containerPort"]


def test_every_configmap_and_secret_key_is_a_real_setting() -> None:
    assert set(configmap_env()) <= SETTING_NAMES, set(configmap_env()) - SETTING_NAMES
    example = the("Secret", [EXAMPLE_SECRET])
    assert set(example["stringData"]) <= SETTING_NAMES, set(example["stringData"]) - SETTING_NAMES
    env = container()["env"]
    assert {item["name"] for item in env} <= SETTING_NAMES
    secret_refs = [item["valueFrom"]["secretKeyRef"] for item in env if "valueFrom" in item]
    # The Deployment reads exactly the keys the example shows, each under the variable it sets.
    assert {ref["key"] for ref in secret_refs} == set(example["stringData"])
    assert all(item["name"] == item["valueFrom"]["secretKeyRef"]["key"] for item in env if "valueFrom" in item)
    assert {ref["name"] for ref in secret_refs} == {example["metadata"]["name"]}
    # A missing key must stop the pod, not start /assist without auth or replicas that disagree.
    required = {ref["key"] for ref in secret_refs if not ref.get("optional", False)}
    assert {env_name("api_keys"), env_name("resume_secret")} <= required
    (source,) = container()["envFrom"]
    assert source["configMapRef"]["name"] == the("ConfigMap")["metadata"]["name"]
    assert "optional" not in source["configMapRef"]


def test_the_configmap_settings_load_and_the_example_secret_cannot_start_a_pod(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    for name in SETTING_NAMES:
        monkeypatch.delenv(name, raising=False)
    for name, value in configmap_env().items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.shutdown_grace == float(configmap_env()["ASSIST_SHUTDOWN_GRACE"])
    for name, value in the("Secret", [EXAMPLE_SECRET])["stringData"].items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=env_name("resume_secret")):
        load_settings()


def test_the_selectors_and_references_agree() -> None:
    deployment = the("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    assert the("Service")["spec"]["selector"] == selector
    assert the("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector
    for constraint in deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]:
        assert constraint["labelSelector"]["matchLabels"] == selector
    target = the("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])


def test_rollouts_scaling_and_evictions_keep_capacity() -> None:
    deployment = the("Deployment")["spec"]
    # The autoscaler owns the count: a `replicas` here would reset it on every apply.
    assert "replicas" not in deployment
    rolling = deployment["strategy"]["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0 and rolling["maxSurge"] not in (0, "0%")
    hpa = the("HorizontalPodAutoscaler")["spec"]
    (metric,) = hpa["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert "cpu" in container()["resources"]["requests"]  # a utilization target is a share of it
    assert "memory" in container()["resources"]["limits"]
    assert hpa["maxReplicas"] > hpa["minReplicas"] >= 2
    # An eviction always leaves pods serving, at the fewest replicas the autoscaler keeps.
    assert hpa["minReplicas"] > the("PodDisruptionBudget")["spec"]["maxUnavailable"]
    assert the("Service")["spec"]["sessionAffinity"] == "None"
