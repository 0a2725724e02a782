"""The docs site keeps its shape and getting-started tells the truth.

mkdocs.yml's nav puts every page of docs/ in one of six groups, once; every long
page opens with a summary; the architecture diagram on the home page is Mermaid
text naming every daemon (pyproject.toml's console scripts) and every CRD
(deploy/crds/). docs/getting-started.md's commands name chart values, objects,
CRDs and console scripts that exist, and its quoted output is held against the
real thing: the CRDs' printer columns, the chart's workloads and replicas, the
`simulate` preview run with the page's own commands over a fixture snapshot,
and its helm commands run as written against a local API server (the notes
helm prints, the ConfigMaps each step changes, its Batch pod validated).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import shlex
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from descheduler import cli as descheduler_cli
from kube import rest
from testbed import controlplane, localcluster
from tests import helmchart

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GETTING_STARTED = DOCS / "getting-started.md"
GROUPS = ["Get started", "Concepts", "Components", "Operate", "Reference", "Benchmarks"]
# A page longer than this opens with a summary: an `abstract` admonition right
# under its title.
LONG = 100
NAMESPACE = "nodeqos-system"


class _MkDocsLoader(yaml.SafeLoader):
    """A safe loader that reads mkdocs.yml's `!!python/name:` tags as plain names."""


_MkDocsLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/name:", lambda _loader, suffix, _node: suffix
)


@functools.cache
def mkdocs_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_MkDocsLoader)
    return config


def nav_pages(entries: list[Any]) -> Iterator[str]:
    """Every page file of a nav (titles and groups dropped), in order."""
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            yield from nav_pages(value)
        else:
            yield value


def test_the_nav_is_six_groups() -> None:
    """The top bar is the six groups, in order, each a list of pages."""
    nav = mkdocs_config()["nav"]
    assert [next(iter(entry)) for entry in nav] == GROUPS
    assert all(isinstance(next(iter(entry.values())), list) for entry in nav)


def test_the_nav_lists_every_page_once() -> None:
    pages = list(nav_pages(mkdocs_config()["nav"]))
    assert sorted(pages) == sorted(p.name for p in DOCS.glob("*.md"))
    assert len(pages) == len(set(pages))


def opens_with_summary(text: str) -> bool:
    """The title, a blank line, then `!!! abstract` with an indented body."""
    lines = text.splitlines()
    return (
        len(lines) > 3
        and lines[0].startswith("# ")
        and lines[1] == ""
        and re.fullmatch(r'!!! abstract( "[^"]+")?', lines[2]) is not None
        and lines[3].startswith("    ")
        and len(lines[3].strip()) > 0
    )


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        pytest.param('# T\n\n!!! abstract "In short"\n    What it is.\n', True, id="summary"),
        pytest.param("# T\n\n!!! abstract\n    What it is.\n", True, id="untitled"),
        pytest.param("# T\n\nProse first.\n\n!!! abstract\n    Late.\n", False, id="late"),
        pytest.param('# T\n\n!!! abstract "In short"\n\nEmpty.\n', False, id="empty"),
        pytest.param('# T\n\n!!! note "In short"\n    A note.\n', False, id="not-abstract"),
    ],
)
def test_the_summary_check_tells_good_from_bad(text: str, ok: bool) -> None:
    assert opens_with_summary(text) is ok


def test_every_long_page_opens_with_a_summary() -> None:
    long_pages = [p for p in sorted(DOCS.glob("*.md")) if len(p.read_text().splitlines()) > LONG]
    assert len(long_pages) >= 10  # the check is not blind
    assert [p.name for p in long_pages if not opens_with_summary(p.read_text())] == []


def console_scripts() -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(pyproject["project"]["scripts"])


def crd_names() -> dict[str, set[str]]:
    """Each CRD's kind -> the names kubectl knows it by (plural, singular, short names)."""
    found = {}
    for path in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        names = yaml.safe_load(path.read_text())["spec"]["names"]
        found[names["kind"]] = {
            names["plural"],
            names.get("singular", names["kind"].lower()),
            *names.get("shortNames", []),
        }
    return found


def fenced(text: str, language: str) -> list[str]:
    """The bodies of the fenced blocks whose info string is `language` ("" for none)."""
    found, info, body = [], None, []
    for line in text.splitlines(keepends=True):
        if info is None and line.startswith("```"):
            info, body = line[3:].strip(), []
        elif info is not None and line.rstrip() == "```":
            if info == language:
                found.append("".join(body))
            info = None
        elif info is not None:
            body.append(line)
    return found


def test_the_fence_reader_pairs_opening_and_closing_fences() -> None:
    text = "```sh\nls\n```\n\nprose\n\n```\nout\n```\n```mermaid\ngraph LR\n```\n"
    assert fenced(text, "sh") == ["ls\n"]
    assert fenced(text, "") == ["out\n"]
    assert fenced(text, "mermaid") == ["graph LR\n"]


def test_the_architecture_diagram_names_every_daemon_and_crd() -> None:
    """docs/index.md holds one Mermaid diagram, rendered by the build's superfences fence."""
    diagrams = fenced((DOCS / "index.md").read_text(), "mermaid")
    assert len(diagrams) == 1
    assert re.match(r"(flowchart|graph) ", diagrams[0])
    assert console_scripts() <= set(re.findall(r"nodeqos-[a-z-]+", diagrams[0]))
    assert set(crd_names()) <= set(re.findall(r"\b[A-Z][A-Za-z]+\b", diagrams[0]))
    fences = [
        fence
        for extension in mkdocs_config()["markdown_extensions"]
        if isinstance(extension, dict) and "pymdownx.superfences" in extension
        for fence in extension["pymdownx.superfences"]["custom_fences"]
    ]
    assert {"name": "mermaid", "class": "mermaid"}.items() <= fences[0].items()


# -- getting-started: its commands -----------------------------------------------------


def shell_commands(text: str) -> list[str]:
    """Each command of the page's ```sh blocks, continuations joined, comments dropped."""
    found = []
    for block in fenced(text, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" # ", 1)[0].strip()
            if line:
                found.append(" ".join(line.split()))
    return found


def set_values(command: str) -> list[tuple[str, str]]:
    """The (path, value) of each `--set path=value` of a helm command."""
    words = shlex.split(command)
    found = []
    for word, following in itertools.pairwise(words):
        if word == "--set":
            path, _, value = following.partition("=")
            found.append((path, value))
    return found


def has_value(values: Mapping[str, Any], path: str) -> bool:
    """Whether `a.b.c` names a value of the chart (a key of values.yaml, at any depth)."""
    node: Any = values
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


@functools.cache
def chart_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((helmchart.CHART / "values.yaml").read_text())
    return values


def helm_commands() -> list[str]:
    return [c for c in shell_commands(GETTING_STARTED.read_text()) if c.startswith("helm ")]


def test_getting_started_sets_only_values_the_chart_has() -> None:
    sets = [s for command in helm_commands() for s in set_values(command)]
    assert ("descheduler.dryRun", "true") in sets  # the scan is not blind
    assert [path for path, _value in sets if not has_value(chart_values(), path)] == []


def test_the_value_check_catches_a_made_up_value() -> None:
    assert set_values("helm upgrade r c --set a.b=1 --set-json x=1 --set c=d=e") == [
        ("a.b", "1"),
        ("c", "d=e"),
    ]
    assert has_value(chart_values(), "manager.sloConfig.colocation-config.enable")
    assert not has_value(chart_values(), "descheduler.dryrun")
    assert not has_value(chart_values(), "descheduler.dryRun.more")


def kubectl_resources(command: str) -> Iterator[str]:
    """The resource types a `kubectl get|describe|delete` command names."""
    words = command.split()
    for verb in ("get", "describe"):
        if words[:1] == ["kubectl"] and verb in words:
            after = [w for w in words[words.index(verb) + 1 :] if not w.startswith("-")]
            if after:
                yield from (kind.split("/")[0] for kind in after[0].split(","))


# Kubernetes' own resource names the page may use.
BUILT_IN = {
    "namespaces",
    "nodes",
    "pods",
    "pod",
    "pdb",
    "events",
    "daemonset",
    "deployments",
    "configmap",
}


def test_getting_started_names_real_crds_and_resources() -> None:
    commands = shell_commands(GETTING_STARTED.read_text())
    named = {r for command in commands for r in kubectl_resources(command)}
    known = set().union(*crd_names().values())
    assert {"nodemetrics", "nodemetric", "nodeslos"} <= named
    assert sorted(named - known - BUILT_IN) == []


def printer_header(kind: str) -> list[str]:
    """The column heads `kubectl get` prints for a CRD of deploy/crds/."""
    for path in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] == kind:
            columns = crd["spec"]["versions"][0].get("additionalPrinterColumns", [])
            return ["NAME", *(column["name"].upper() for column in columns)]
    raise AssertionError(f"no CRD of kind {kind}")


@pytest.mark.parametrize("kind", ["NodeMetric", "NodeSLO"])
def test_getting_started_quotes_the_columns_kubectl_prints(kind: str) -> None:
    """The page's `kubectl get nodemetrics` / `nodeslos` output has the CRD's printer columns."""
    heads = [block.split("\n", 1)[0].split() for block in fenced(GETTING_STARTED.read_text(), "")]
    assert printer_header(kind) in heads


def test_getting_started_lists_the_workloads_the_chart_installs() -> None:
    """The page's `get daemonset,deployments` output names the chart's DaemonSet and
    every Deployment, each ready at the chart's default replicas."""
    docs = helmchart.template(namespace=NAMESPACE)
    want = {
        f"{doc['kind'].lower()}.apps/{doc['metadata']['name']}": doc["spec"].get("replicas")
        for doc in docs
        if doc["kind"] in {"DaemonSet", "Deployment"}
    }
    block = next(b for b in fenced(GETTING_STARTED.read_text(), "") if "DESIRED" in b)
    rows = [line.split() for line in block.splitlines() if ".apps/" in line]
    listed = {row[0]: row[1] for row in rows}
    assert set(listed) == set(want)
    assert all(
        listed[name] == f"{replicas}/{replicas}"
        for name, replicas in want.items()
        if replicas is not None
    )


def test_getting_started_runs_only_console_scripts_of_ours() -> None:
    """A nodeqos-* word at the start of a command, or after a venv's bin/, is a console script."""
    text = GETTING_STARTED.read_text()
    run = {
        match
        for command in shell_commands(text)
        for match in re.findall(r"(?:^|/bin/)(nodeqos-[a-z-]+)", command)
    }
    assert run == {"nodeqos-descheduler"}
    assert run <= console_scripts()


def rendered_names(docs: list[dict[str, Any]]) -> set[str]:
    """The names of the chart's objects and the app.kubernetes.io/name labels they carry."""
    names = {doc["metadata"]["name"] for doc in docs}
    for doc in docs:
        labels = doc.get("metadata", {}).get("labels") or {}
        names.update(v for k, v in labels.items() if k == "app.kubernetes.io/name")
    return names


def test_getting_started_names_objects_the_chart_renders() -> None:
    """Every nodeqos-* name in the page's kubectl commands is the namespace, or an
    object (or the app label) of the chart's render, and the data key it reads exists."""
    docs = helmchart.template(namespace=NAMESPACE)
    kubectl = [c for c in shell_commands(GETTING_STARTED.read_text()) if "kubectl" in c]
    named = {n for command in kubectl for n in re.findall(r"nodeqos-[a-z-]*[a-z]", command)}
    assert "nodeqos-descheduler-config" in named
    assert sorted(named - rendered_names(docs) - {NAMESPACE}) == []
    config_keys = {key for doc in docs if doc["kind"] == "ConfigMap" for key in doc.get("data", {})}
    for command in kubectl:
        for key in re.findall(r"\{\.data\.([^}]+)\}", command):
            assert key.replace("\\.", ".") in config_keys, command


# -- getting-started: its helm commands, run -------------------------------------------


def quoted_output(text: str, first_line: str) -> list[str]:
    """The lines of the page's plain ``` block that starts with `first_line`."""
    for block in fenced(text, ""):
        if block.startswith(first_line):
            return block.splitlines()
    raise AssertionError(f"no output block starting {first_line!r}")


SNAPSHOT = ROOT / "tests" / "fixtures" / "descheduler" / "snapshot-lownodeload.yaml"
SNAPSHOT_TIME = "2024-05-01T12:00:00Z"  # the snapshot's NodeMetrics are fresh then


def sed_substitutions(command: str) -> list[tuple[str, str]]:
    """The (pattern, replacement) of each `sed 's/a/b/'` in a shell command."""
    return re.findall(r"sed '?s/([^/]*)/([^/]*)/'?", command)


def test_the_simulate_preview_prints_what_the_page_quotes(tmp_path: Path) -> None:
    """The chart's descheduler configuration, installed as step 2 sets it and edited by
    the page's sed, simulated by the page's command over the snapshot the page names,
    prints the output the page quotes."""
    commands = shell_commands(GETTING_STARTED.read_text())
    installed = [f"--set={path}={value}" for path, value in set_values(helm_commands()[0])]
    docs = helmchart.template(namespace=NAMESPACE, extra=installed)
    config = next(
        doc["data"]["descheduler.yaml"]
        for doc in docs
        if doc["metadata"]["name"] == "nodeqos-descheduler-config"
    )
    fetch = next(c for c in commands if "nodeqos-descheduler-config" in c and "sed" in c)
    assert fetch.endswith("> descheduler.yaml")
    for pattern, replacement in sed_substitutions(fetch):
        assert re.search(pattern, config), f"the page's sed finds no {pattern!r}"
        config = re.sub(pattern, replacement, config)
    (tmp_path / "descheduler.yaml").write_text(config)
    simulate = next(c for c in commands if c.split()[0].endswith("/nodeqos-descheduler"))
    args = [
        str(tmp_path / w)
        if w == "descheduler.yaml"
        else str(SNAPSHOT)
        if w == "snapshot.yaml"
        else w
        for w in shlex.split(simulate)[1:]
    ]
    result = CliRunner().invoke(descheduler_cli.main, [*args, "--now", SNAPSHOT_TIME])
    assert result.exit_code == 0, result.output
    page = GETTING_STARTED.read_text()
    assert quoted_output(page, "Simulated descheduling cycle") == result.stdout.strip().splitlines()


def test_the_sed_reader_reads_a_substitution() -> None:
    assert sed_substitutions("x | sed 's/a: 5/a: 1/' > f") == [("a: 5", "a: 1")]
    assert sed_substitutions("x > f") == []


def data_of(kube: rest.Rest, name: str, key: str) -> Any:
    configmap = kube.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}")
    return configmap["data"][key]


@pytest.mark.controlplane
def test_the_helm_commands_run_as_written(
    private_control_plane: controlplane.ControlPlane,
) -> None:
    """Install, then each upgrade, as the page writes them (a registry filled in), on a
    control plane of its own: helm prints the notes the page quotes, and the
    ConfigMaps then hold what each step says it turns on."""
    api = rest.Rest(rest.api_client(private_control_plane.kubeconfig), qps=0)
    commands = helm_commands()
    assert [c.split()[:2] for c in commands] == [
        ["helm", "install"],
        ["helm", "upgrade"],
        ["helm", "upgrade"],
        ["helm", "uninstall"],
    ]
    kubeconfig = ("--kubeconfig", str(private_control_plane.kubeconfig))
    outputs, dry_runs = [], []
    for command in commands[:3]:
        words = shlex.split(command.replace("<registry>", "registry.example"))
        outputs.append(helmchart.run(*words[1:], *kubeconfig).stdout)
        config = data_of(api, "nodeqos-descheduler-config", "descheduler.yaml")
        dry_runs.append(yaml.safe_load(config)["dryRun"])
    # step 2 installs in dry run, step 4 turns it off, step 5 leaves it off
    assert dry_runs == [True, False, False]
    page = GETTING_STARTED.read_text()
    printed = [
        re.sub(r"^LAST DEPLOYED: .*", "LAST DEPLOYED: <date>", line)
        for line in outputs[0].splitlines()
    ]
    assert quoted_output(page, "NAME: nodeqos") == "\n".join(printed).strip().splitlines()
    colocation = json.loads(data_of(api, "slo-controller-config", "colocation-config"))
    thresholds = json.loads(data_of(api, "slo-controller-config", "resource-threshold-config"))
    assert colocation["enable"] is True
    assert thresholds["clusterStrategy"]["enable"] is True
    # the image values of step 2 survive --reuse-values
    agent = api.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/nodeqos-agent")
    assert agent["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "registry.example/nodeqos:0.1.0"
    )
    # step 5's Batch pod: the API server takes it as written (server-side dry run)
    pods = [d for d in fenced(page, "yaml") if "kind: Pod" in d]
    assert len(pods) == 1
    pod = yaml.safe_load(pods[0])
    localcluster.apply(api, {"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "default", "namespace": "default"}})  # fmt: skip
    created = api.request(
        "POST", "/api/v1/namespaces/default/pods", query={"dryRun": "All"}, body=pod
    )
    assert created["status"]["qosClass"] == "BestEffort"  # as the page says
    helmchart.run(*shlex.split(commands[3])[1:], *kubeconfig)
    left = api.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps")["items"]
    names = {item["metadata"]["name"] for item in left}
    assert not names & {"nodeqos-descheduler-config", "slo-controller-config"}
