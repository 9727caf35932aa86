"""Reading rendered Kubernetes manifests: resources by kind, the pods of workloads, their
containers and the environment a container gets."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]

Resource = dict[str, Any]
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")


@dataclass(frozen=True)
class Pod:
    """The pod template of a workload."""

    owner: Resource

    @property
    def kind(self) -> str:
        return str(self.owner["kind"])

    @property
    def name(self) -> str:
        return str(self.owner["metadata"]["name"])

    @property
    def spec(self) -> Resource:
        spec: Resource = self.owner["spec"]["template"]["spec"]
        return spec

    @property
    def labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.owner["spec"]["template"]["metadata"]["labels"]
        return labels

    def containers(self, *, init: bool = True) -> list[Resource]:
        found: list[Resource] = list(self.spec["containers"])
        if init:
            found += self.spec.get("initContainers", [])
        return found

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class Manifests:
    resources: list[Resource]

    @classmethod
    def parse(cls, text: str) -> Manifests:
        return cls([doc for doc in yaml.safe_load_all(text) if doc])

    def of_kind(self, kind: str) -> list[Resource]:
        return [r for r in self.resources if r["kind"] == kind]

    def get(self, kind: str, name: str) -> Resource:
        matches = [r for r in self.of_kind(kind) if r["metadata"]["name"] == name]
        assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
        return matches[0]

    def named_prefix(self, kind: str, prefix: str) -> Resource:
        """A generated ConfigMap or Secret: kustomize appends a hash to the name."""
        matches = [
            r
            for r in self.of_kind(kind)
            if r["metadata"]["name"] == prefix or r["metadata"]["name"].startswith(f"{prefix}-")
        ]
        assert len(matches) == 1, f"expected one {kind} {prefix}*, found {len(matches)}"
        return matches[0]

    def pods(self) -> Iterator[Pod]:
        for resource in self.resources:
            if resource["kind"] in WORKLOAD_KINDS:
                yield Pod(resource)

    def pod(self, kind: str, name: str) -> Pod:
        return Pod(self.get(kind, name))

    def interlock_pod(self, component: str) -> Pod:
        return self.pod("Deployment", f"interlock-{component}")

    def environment(self, container: Resource) -> dict[str, Resource]:
        """Every variable the container gets from its env and from ConfigMaps in envFrom, as
        {name: {"value": ...} or {"valueFrom": ...}}. Secrets in envFrom are not expanded."""
        variables: dict[str, Resource] = {}
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                config_map = self.get("ConfigMap", source["configMapRef"]["name"])
                variables |= {k: {"value": v} for k, v in config_map.get("data", {}).items()}
        for entry in container.get("env", []):
            variables[entry["name"]] = entry
        return variables


def is_subset(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def image_is_pinned(image: str) -> bool:
    """A digest, or a tag other than "latest" (the registry's port is not a tag)."""
    if "@sha256:" in image:
        return True
    repository, _, tag = image.rpartition("/")[2].rpartition(":")
    return bool(repository) and tag not in ("", "latest")
