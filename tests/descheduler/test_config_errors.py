"""Invalid configurations are rejected with every problem and its exact field path (D10)."""

from __future__ import annotations

import textwrap

import pytest

from descheduler import config
from descheduler.plugins import in_tree

KOORD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"


def problems(text: str) -> list[str]:
    """The `path: message` lines of the ConfigError raised for `text`."""
    with pytest.raises(config.ConfigError) as caught:
        config.load_config(textwrap.dedent(text), plugins=in_tree())
    assert str(caught.value) == "\n".join(str(error) for error in caught.value.errors)
    return [str(error) for error in caught.value.errors]


def lownodeload(args: str) -> str:
    """A Koordinator document enabling LowNodeLoad with the given args block."""
    body = textwrap.indent(textwrap.dedent(args), " " * 6)
    return (
        KOORD
        + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled: [{name: LowNodeLoad}]\n"
        + "  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
        + body
    )


LNL = "profiles[0].pluginConfig[LowNodeLoad].args"

CASES = [
    pytest.param(
        KOORD + "deschedulingIntervall: 10s\n",
        ['deschedulingIntervall: unknown field (did you mean "deschedulingInterval"?)'],
        id="unknown-top-level-field",
    ),
    pytest.param(
        KOORD + "profiles:\n- name: p\n  pluginConfigs: []\n",
        ['profiles[0].pluginConfigs: unknown field (did you mean "pluginConfig"?)'],
        id="unknown-profile-field",
    ),
    pytest.param(
        lownodeload("highThreshold: {cpu: 70}\n"),
        [f'{LNL}.highThreshold: unknown field (did you mean "highThresholds"?)'],
        id="unknown-args-field",
    ),
    pytest.param(
        lownodeload("lowThresholds: {cpu: 80}\nhighThresholds: {cpu: 70}\n"),
        [f"{LNL}.lowThresholds.cpu: must not exceed highThresholds.cpu (70)"],
        id="low-above-high",
    ),
    pytest.param(
        lownodeload("lowThresholds: {cpu: 20}\nhighThresholds: {cpu: 120}\n"),
        [f"{LNL}.highThresholds.cpu: must be within [0, 100]"],
        id="threshold-120",
    ),
    pytest.param(
        lownodeload("lowThresholds: {cpu: 20}\nhighThresholds: {cpu: 70, memory: 80}\n"),
        [
            f"{LNL}.highThresholds.memory: has no lowThresholds entry; both must name the same resources"
        ],
        id="mismatched-threshold-keys",
    ),
    pytest.param(
        lownodeload(
            "lowThresholds: {cpu: 20}\nhighThresholds: {cpu: 70}\nprodHighThresholds: {cpu: 80}\n"
        ),
        [
            f"{LNL}.prodHighThresholds.cpu: has no prodLowThresholds entry; both must name the same resources",
            f"{LNL}.prodHighThresholds.cpu: must not exceed highThresholds.cpu (70)",
        ],
        id="prod-thresholds",
    ),
    pytest.param(
        lownodeload(
            """\
            lowThresholds: {cpu: 20}
            highThresholds: {cpu: 70}
            nodePools:
            - name: big
              lowThresholds: {cpu: 75}
            """
        ),
        [f"{LNL}.nodePools[0].lowThresholds.cpu: must not exceed highThresholds.cpu (70)"],
        id="pool-low-above-inherited-high",
    ),
    pytest.param(
        lownodeload("evictableNamespaces: {include: [a], exclude: [b]}\n"),
        [f"{LNL}.evictableNamespaces: only one of include and exclude may be set"],
        id="include-and-exclude",
    ),
    pytest.param(
        lownodeload("anomalyCondition: {timeout: 5 minutes}\n"),
        [
            f"{LNL}.anomalyCondition.timeout: invalid duration '5 minutes'"
            ' (use Go syntax such as "90s", "5m" or "1h30m")'
        ],
        id="bad-duration",
    ),
    pytest.param(
        lownodeload("anomalyCondition: {consecutiveAbnormalities: -1}\n"),
        [f"{LNL}.anomalyCondition.consecutiveAbnormalities: must be >= 0"],
        id="negative-abnormalities",
    ),
    pytest.param(
        lownodeload("resourceWeights: {cpu: 0}\n"),
        [f"{LNL}.resourceWeights.cpu: must be >= 1"],
        id="zero-weight",
    ),
    pytest.param(
        lownodeload("kind: LowNodeUtilizationArgs\n"),
        [f"{LNL}.kind: must be \"LowNodeLoadArgs\" (got 'LowNodeUtilizationArgs')"],
        id="args-wrong-kind",
    ),
    pytest.param(
        KOORD
        + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled: [{name: LowNodeLoads}]\n",
        [
            'profiles[0].plugins.balance.enabled[0].name: unknown plugin "LowNodeLoads"; known plugins: '
        ],
        id="unknown-plugin",
    ),
    pytest.param(
        KOORD + "profiles:\n- name: p\n  pluginConfig:\n  - name: Nope\n",
        ['profiles[0].pluginConfig[0].name: unknown plugin "Nope"; known plugins: '],
        id="unknown-plugin-config",
    ),
    pytest.param(
        KOORD
        + "profiles:\n- name: p\n  plugins:\n    deschedule:\n      enabled: [{name: LowNodeLoad}]\n",
        [
            "profiles[0].plugins.deschedule.enabled[0].name: plugin LowNodeLoad cannot run at the "
            "deschedule extension point; it serves: balance"
        ],
        id="wrong-extension-point",
    ),
    pytest.param(
        KOORD + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled: [a, a]\n",
        [
            'profiles[0].plugins.balance.enabled[0]: unknown plugin "a"; known plugins: ',
            'profiles[0].plugins.balance.enabled[1]: unknown plugin "a"; known plugins: ',
        ],
        id="string-form-unknown",
    ),
    pytest.param(
        KOORD
        + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled: [RemoveDuplicates, RemoveDuplicates]\n",
        [
            "profiles[0].plugins.balance.enabled[1]: plugin RemoveDuplicates is enabled twice at the balance"
        ],
        id="enabled-twice",
    ),
    pytest.param(
        KOORD + "profiles:\n- name: p\n- name: p\n",
        ['profiles[1].name: duplicate profile name "p" (also profiles[0])'],
        id="duplicate-profile",
    ),
    pytest.param(
        KOORD + "profiles:\n- name: a\n- {}\n",
        ["profiles[1].name: required"],
        id="unnamed-profile-among-several",
    ),
    pytest.param(
        KOORD
        + "profiles:\n- name: p\n  pluginConfig:\n  - name: RemoveDuplicates\n  - name: RemoveDuplicates\n",
        [
            "profiles[0].pluginConfig[1].name: duplicate pluginConfig entry for RemoveDuplicates (first at"
        ],
        id="duplicate-plugin-config",
    ),
    pytest.param(
        "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\n",
        ["apiVersion: must be \"descheduler/v1alpha2\" (got 'descheduler/v1alpha1')"],
        id="old-api-version",
    ),
    pytest.param(
        "apiVersion: descheduler/v1alpha2\nkind: KubeSchedulerConfiguration\n",
        [
            "kind: must be one of: DeschedulerConfiguration, DeschedulerPolicy"
            " (got 'KubeSchedulerConfiguration')"
        ],
        id="unknown-kind",
    ),
    pytest.param(
        KOORD + "leaderElection: {leaseDuration: 5s}\n",
        ["leaderElection.leaseDuration: must not be shorter than renewDeadline"],
        id="lease-shorter-than-renew",
    ),
    pytest.param(
        KOORD + "maxNoOfPodsToEvictPerNode: -1\ndryRun: yes please\n",
        ["maxNoOfPodsToEvictPerNode: must be >= 0", "dryRun: must be true or false, not a string"],
        id="scalar-types",
    ),
    pytest.param(
        KOORD + "nodeSelector: 'zone in (a'\n",
        ["nodeSelector: invalid selector 'zone in (a': unexpected end"],
        id="bad-string-selector",
    ),
    pytest.param(
        KOORD + "nodeSelector:\n  matchExpressions:\n  - {key: zone, operator: In}\n",
        ["nodeSelector.matchExpressions[0].values: must be non-empty for In"],
        id="bad-mapping-selector",
    ),
    pytest.param(
        KOORD + "profiles:\n- name: p\n  nodeSelector: {matchLabels: {zone: [a]}}\n",
        ["profiles[0].nodeSelector.matchLabels.zone: labels and values must be strings"],
        id="bad-profile-selector",
    ),
    pytest.param(
        "kind: [\n",
        ["line 2, column 1: expected the node content, but found '<stream end>'"],
        id="yaml-syntax",
    ),
    pytest.param(
        KOORD + "dryRun: true\ndryRun: false\n",
        ["line 4, column 1: found duplicate key 'dryRun'"],
        id="yaml-duplicate-key",
    ),
    pytest.param(
        "? [a, b]\n: 1\n",
        ["line 1, column 3: found unhashable key"],
        id="yaml-unhashable-key",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_invalid_configuration_is_reported_with_its_path(text: str, expected: list[str]) -> None:
    """Each problem is reported once, at its field path."""
    found = problems(text)
    assert len(found) == len(expected), found
    for line, prefix in zip(found, expected, strict=True):
        assert line.startswith(prefix), (line, prefix)


def test_unknown_plugin_error_lists_known_plugins() -> None:
    """The message names every plugin the user could have meant."""
    (line,) = problems(
        KOORD + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled: [Nope]\n"
    )
    for name in ("LowNodeLoad", "MigrationController", "DefaultEvictor", "RemoveDuplicates"):
        assert name in line


def test_several_errors_are_all_reported() -> None:
    """Problems in different places of one file all come back in one error, in file order."""
    found = problems(
        KOORD
        + """\
deschedulingInterval: 10 minutes
colour: blue
profiles:
- name: p
  plugins:
    balance:
      enabled: [{name: LowNodeLoad}, {name: Nope}]
    deschedule:
      enabled: [{name: RemoveDuplicates}]
  pluginConfig:
  - name: LowNodeLoad
    args:
      lowThresholds: {cpu: 80, memory: 20}
      highThresholds: {cpu: 70, memory: 60}
      evictableNamespaces: {include: [a], exclude: [b]}
  - name: MigrationController
    args:
      evictionPolicy: Evict
      maxUnavailablePerWorkload: 10 percent
- name: p
"""
    )
    paths = [line.split(": ", 1)[0] for line in found]
    assert paths == [
        "deschedulingInterval",
        "colour",
        "profiles[0].plugins.balance.enabled[1].name",
        "profiles[0].plugins.deschedule.enabled[0].name",
        "profiles[0].pluginConfig[LowNodeLoad].args.evictableNamespaces",
        "profiles[0].pluginConfig[LowNodeLoad].args.lowThresholds.cpu",
        "profiles[0].pluginConfig[MigrationController].args.evictionPolicy",
        "profiles[0].pluginConfig[MigrationController].args.maxUnavailablePerWorkload",
        "profiles[1].name",
    ]


def test_enabled_plugin_needing_args_says_it_has_no_entry() -> None:
    """Upstream plugins without usable defaults fail with a hint about pluginConfig."""
    found = problems(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
        "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled: [LowNodeUtilization]\n"
    )
    hint = "(LowNodeUtilization is enabled but has no pluginConfig entry)"
    args = "profiles[0].pluginConfig[LowNodeUtilization].args"
    assert found == [
        f"{args}.thresholds: required: set a percentage for at least one resource {hint}",
        f"{args}.targetThresholds: required: set a percentage for at least one resource {hint}",
    ]


def test_missing_file_is_one_clear_error(tmp_path: object) -> None:
    """A missing file is reported, not raised as OSError."""
    import pathlib

    assert isinstance(tmp_path, pathlib.Path)
    missing = tmp_path / "absent.yaml"
    with pytest.raises(config.ConfigError) as caught:
        config.load_config(missing, plugins=in_tree())
    assert [str(error) for error in caught.value.errors] == [f"{missing}: no such file"]


def test_text_that_is_not_a_mapping_hints_at_paths() -> None:
    """Passing a file name as a str is caught with a hint."""
    assert problems("descheduler.yaml") == [
        "the configuration must be a YAML mapping, not str (to load a file, pass a pathlib.Path)"
    ]
