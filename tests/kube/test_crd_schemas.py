"""deploy/crds/*.yaml offline: structural schemas that accept our models' JSON, reject garbage.

(tests/kube/test_crds.py checks the same CRDs on the real API server.)

A small validator below implements the subset of OpenAPI v3 the CRDs use (types,
properties, required, enum, pattern, bounds, date-time, int-or-string,
preserve-unknown-fields, nullable), so the models' `to_api()` output is checked
against the schema without an API server. Fields the schema does not know are
reported, because the server would silently prune them.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube import configcodecs as codecs
from kube import configstruct, migration, nodeslo, slo
from kube.quantity import Resources
from tests import builders

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
Schema = dict[str, Any]


def _load(filename: str) -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all((CRDS / filename).read_text()) if d]
    return doc  # type: ignore[no-any-return]


NODEMETRIC = _load("slo.koordinator.sh_nodemetrics.yaml")
NODESLO = _load("slo.koordinator.sh_nodeslos.yaml")
PMJ = _load("scheduling.koordinator.sh_podmigrationjobs.yaml")


def _schema(crd: dict[str, Any]) -> Schema:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def validate(schema: Schema, value: Any, path: str = "") -> list[str]:
    """Every violation of `schema` by `value`, as "path: problem"."""
    where = path or "<root>"
    if path == ".metadata":  # ObjectMeta is validated by the server itself, not the CRD
        return []
    if value is None:
        return [] if schema.get("nullable") else [f"{where}: null"]
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{where}: must be an integer or a string"]
        if (
            isinstance(value, str)
            and "pattern" in schema
            and not re.search(schema["pattern"], value)
        ):
            return [f"{where}: {value!r} does not match the pattern"]
        return []
    kind = schema.get("type")
    checks: dict[str, Callable[[Any], bool]] = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }
    if kind is not None and not checks[kind](value):
        return [f"{where}: must be {kind}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if kind == "string":
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value!r} does not match the pattern")
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: too short")
        if schema.get("format") == "date-time":
            try:
                datetime.fromisoformat(value)
            except ValueError:
                errors.append(f"{where}: {value!r} is not a date-time")
    out_of_bounds = kind == "integer" and not (
        schema.get("minimum", value) <= value <= schema.get("maximum", value)
    )
    if out_of_bounds:
        errors.append(f"{where}: {value} out of bounds")
    if kind == "array":
        for i, item in enumerate(value):
            errors += validate(schema["items"], item, f"{path}[{i}]")
    if kind == "object":
        errors += [f"{path}.{r}: required" for r in schema.get("required", ()) if r not in value]
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                errors += validate(props[key], item, f"{path}.{key}")
            elif extra is not None:
                errors += validate(extra, item, f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{path}.{key}: unknown field (the server would prune it)")
    return errors


def _nodes(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path, schema
    for key, sub in schema.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _nodes(schema[key], f"{path}[{key}]")


@pytest.mark.parametrize(
    ("crd", "name", "kind"),
    [
        pytest.param(NODEMETRIC, "nodemetrics.slo.koordinator.sh", "NodeMetric", id="nodemetric"),
        pytest.param(NODESLO, "nodeslos.slo.koordinator.sh", "NodeSLO", id="nodeslo"),
        pytest.param(
            PMJ,
            "podmigrationjobs.scheduling.koordinator.sh",
            "PodMigrationJob",
            id="podmigrationjob",
        ),
    ],
)
def test_crd_identity_and_structure(crd: dict[str, Any], name: str, kind: str) -> None:
    """Cluster-scoped v1alpha1 with a status subresource and a structural schema."""
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["metadata"]["name"] == name
    assert crd["spec"]["names"]["kind"] == kind and crd["spec"]["scope"] == "Cluster"
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    for path, node in _nodes(_schema(crd)):
        open_node = node.get("x-kubernetes-int-or-string") or node.get(
            "x-kubernetes-preserve-unknown-fields"
        )
        assert "type" in node or open_node, f"{path}: no type (not structural)"
        assert not ("properties" in node and "additionalProperties" in node), path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string"), f"{path}: anyOf outside int-or-string"


def test_nodemetric_from_models_validates() -> None:
    """A full NodeMetric and one with empty aggregates match the schema."""
    full = builders.make_nodemetric_dict(
        "n1",
        pods={
            "a": "1200m",
            "x/b": {"cpu": 5, "memory": "1Gi", "priority": "koord-batch", "qos": "BE"},
        },
    )
    assert validate(_schema(NODEMETRIC), full) == []
    empty = slo.NodeMetric(
        metadata=slo.ObjectMeta("n2"),
        status=slo.NodeMetricStatus(
            update_time=builders.T0,
            node_metric=slo.NodeMetricInfo(
                aggregated_node_usages=(slo.AggregatedUsage.empty(timedelta(minutes=5)),)
            ),
            pods_metric=(slo.PodMetricInfo(name="p", namespace="d"),),
        ),
    )
    assert validate(_schema(NODEMETRIC), empty.to_api()) == []


def test_nodemetric_with_prediction_validates_and_round_trips() -> None:
    """prodReclaimableMetric and prodPeakMetric, Koordinator's shape, match the schema."""
    status = slo.NodeMetricStatus(
        update_time=builders.T0,
        prod_reclaimable=Resources({"cpu": 1450, "memory": 1 << 30}),
        prod_peak=Resources({"cpu": 0, "memory": 0}),
    )
    obj = slo.NodeMetric(metadata=slo.ObjectMeta("n1"), status=status).to_api()
    assert obj["status"]["prodReclaimableMetric"] == {
        "resource": {"resources": {"cpu": "1450m", "memory": "1073741824"}}
    }
    assert validate(_schema(NODEMETRIC), obj) == []
    assert slo.NodeMetricStatus.from_api(obj["status"]) == status
    obj["status"]["prodReclaimableMetric"]["resource"]["resources"]["cpu"] = "lots"
    errors = validate(_schema(NODEMETRIC), obj)
    assert len(errors) == 1 and "prodReclaimableMetric" in errors[0], errors


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        target = obj
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return mutate


_DELETE = object()
_USAGE = ["status", "nodeMetric", "nodeUsage", "resources"]


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        pytest.param(_set([*_USAGE, "cpu"], "banana"), "does not match", id="cpu-banana"),
        pytest.param(_set([*_USAGE, "cpu"], True), "integer or a string", id="cpu-bool"),
        pytest.param(
            _set(["status", "podsMetric", 0, "name"], _DELETE),
            ".name: required",
            id="pod-without-name",
        ),
        pytest.param(_set(["status", "podsMetric", 0, "qos"], "GOLD"), "not in", id="bad-qos"),
        pytest.param(
            _set(["status", "updateTime"], "yesterday"), "date-time", id="bad-update-time"
        ),
        pytest.param(
            _set(["status", "nodeMetric", "aggregatedNodeUsages", 0, "duration"], "5 minutes"),
            "does not match",
            id="bad-duration",
        ),
        pytest.param(
            _set(["spec", "metricCollectPolicy", "reportIntervalSeconds"], 0),
            "out of bounds",
            id="zero-interval",
        ),
        pytest.param(_set(["status", "surprise"], 1), "unknown field", id="unknown-field"),
    ],
)
def test_nodemetric_schema_rejects_garbage(
    mutate: Callable[[dict[str, Any]], None], problem: str
) -> None:
    """Malformed quantities, missing names, bad enums, times and durations are caught."""
    obj = copy.deepcopy(builders.make_nodemetric_dict("n1", pods={"a": "100m"}))
    obj["status"]["podsMetric"][0]["qos"] = "LS"
    mutate(obj)
    errors = validate(_schema(NODEMETRIC), obj)
    assert len(errors) == 1 and problem in errors[0], errors


def test_quantity_pattern_agrees_with_the_parser() -> None:
    """Strings the schema accepts are exactly those kube.quantity parses (samples)."""
    pattern = _schema(NODEMETRIC)["properties"]["status"]["properties"]["nodeMetric"]["properties"][
        "nodeUsage"
    ]["properties"]["resources"]["additionalProperties"]["pattern"]
    for text in ("1", "1500m", "1.5Gi", ".5", "5.", "-1", "+1e3", "1E-3", "2E", "123456789"):
        assert re.search(pattern, text), text
        Resources.from_api({"x": text})
    for text in ("", "1.2.3", "5Xi", "abc", "1e", "--1", " 1", "1e1.5", "1K"):
        assert not re.search(pattern, text), text


def test_nodeslo_defaults_and_opaque_sections_validate() -> None:
    """The default NodeSLO and Koordinator's opaque sections match the schema."""
    spec = nodeslo.NodeSLOSpec.defaults().to_api()
    spec["resourceQOSStrategy"]["beClass"]["blkioQOS"]["blocks"] = [
        {"name": "/dev/sda", "type": "device", "ioCfg": {"readIOPS": 100, "ioWeightPercent": 50}}
    ]
    spec["resourceQOSStrategy"]["lsClass"]["networkQOS"]["ingressLimit"] = "50M"
    spec["extensions"] = {"anything": {"goes": [1]}}
    spec["hostApplications"] = [
        {"name": "nginx", "qos": "LS", "cgroupPath": {"base": "CgroupRoot"}}
    ]
    obj = nodeslo.NodeSLO(metadata=slo.ObjectMeta("n1")).to_api() | {"spec": spec}
    assert validate(_schema(NODESLO), obj) == []


def _struct_fields(cls: type[Any], path: str) -> Iterator[tuple[str, configstruct.Codec[Any]]]:
    for f in dataclasses.fields(cls):
        here, codec = f"{path}.{f.metadata['yaml_key']}", f.metadata["yaml_codec"]
        yield here, codec
        if isinstance(codec, configstruct.Nested):
            yield from _struct_fields(codec.cls, here)


def test_nodeslo_schema_matches_the_model() -> None:
    """Every modelled NodeSLO field is in the CRD with the model's type, bounds and choices."""
    schema_nodes = dict(_nodes(_schema(NODESLO)["properties"]["spec"], ".spec"))
    types = {codecs.Integer: "integer", codecs.Boolean: "boolean", codecs.KeyChoice: "string"}
    for path, codec in _struct_fields(nodeslo.NodeSLOSpec, ".spec"):
        node = schema_nodes.get(path)
        assert node is not None, f"{path} missing from the CRD"
        if type(codec) in types:
            assert node["type"] == types[type(codec)], path
        if isinstance(codec, codecs.Quantity):
            assert node.get("x-kubernetes-int-or-string"), path
        lo, hi = getattr(codec, "minimum", None), getattr(codec, "maximum", None)
        assert node.get("minimum") == lo and node.get("maximum") == hi, path
        choices = list(codec.allowed) if isinstance(codec, codecs.KeyChoice) else None
        assert node.get("enum") == choices, path


def test_podmigrationjob_validates_and_requires_pod_ref() -> None:
    """Our PodMigrationJob JSON matches; a job without podRef does not."""
    job = migration.PodMigrationJob(
        metadata=slo.ObjectMeta("j"),
        spec=migration.PodMigrationJobSpec(
            pod_ref=migration.ObjectReference(namespace="d", name="p"),
            ttl=timedelta(minutes=10),
            mode=migration.PodMigrationJobMode.RESERVATION_FIRST,
            reservation_options={"template": {"spec": {"anything": True}}},
        ),
        status=migration.PodMigrationJobStatus(
            phase=migration.PodMigrationJobPhase.RUNNING,
            conditions=(
                migration.Condition(type="Eviction", status="True", last_probe_time=builders.T0),
            ),
        ),
    )
    wire = job.to_api()
    assert validate(_schema(PMJ), wire) == []
    del wire["spec"]["podRef"]
    assert validate(_schema(PMJ), wire) == [".spec.podRef: required"]
