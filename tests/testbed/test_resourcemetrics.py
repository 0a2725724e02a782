"""testbed.resourcemetrics: the stand-in kubelets' /metrics/resource the peers benchmark's
metrics-server scrapes."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest

from testbed import resourcemetrics

USAGE = resourcemetrics.NodeUsage(
    cpu_millis=32_000,
    memory_bytes=5 << 30,
    pods=(
        resourcemetrics.PodUsage("team-00", "web-1", cpu_millis=250, memory_bytes=1 << 28),
        resourcemetrics.PodUsage("team-01", "db-1", cpu_millis=7, memory_bytes=1 << 20),
    ),
)


def samples(text: str) -> dict[str, tuple[float, int]]:
    """Series (name and labels) -> (value, timestamp ms) of an exposition text."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            match = re.fullmatch(r"(\S+) (\S+)(?: (\d+))?", line)
            assert match, line
            out[match[1]] = (float(match[2]), int(match[3] or 0))
    return out


def rate_millicores(series: str, since: int, t1: int, t2: int) -> float:
    """The CPU rate metrics-server derives from two scrapes (its storage's resourceUsage)."""
    scrapes = [samples(resourcemetrics.render(USAGE, t, since))[series] for t in (t1, t2)]
    (c1, s1), (c2, s2) = scrapes
    # metrics-server: uint64(value * 1e9), through a float64 exact below 2**53
    assert c2 * 1e9 < 2**53
    nanos = int(c2 * 1e9) - int(c1 * 1e9)
    return nanos / ((s2 - s1) / 1000) / 1e6


@pytest.mark.parametrize(
    ("series", "millis"),
    [
        pytest.param("node_cpu_usage_seconds_total", 32_000, id="node"),
        pytest.param(
            'container_cpu_usage_seconds_total{container="main",namespace="team-00",pod="web-1"}',
            250,
            id="pod",
        ),
        pytest.param(
            'container_cpu_usage_seconds_total{container="main",namespace="team-01",pod="db-1"}',
            7,
            id="small-pod",
        ),
    ],
)
def test_cpu_counters_grow_at_the_given_rate(series: str, millis: int) -> None:
    """Two scrapes 15 s apart, a day into a run, give the configured millicores to well
    under a millicore (a 32-core node included: counting from the epoch overflowed)."""
    since = 1_790_000_000_123
    now = since + 86_400_000
    assert rate_millicores(series, since, now, now + 15_000) == pytest.approx(millis, abs=1e-3)


def test_render_has_every_series_metrics_server_reads() -> None:
    """Node cpu and working set, and each container's cpu, working set and start time."""
    got = samples(resourcemetrics.render(USAGE, 1_000, 0))
    assert got["node_memory_working_set_bytes"] == (5 << 30, 1_000)
    labels = '{container="main",namespace="team-01",pod="db-1"}'
    assert got[f"container_memory_working_set_bytes{labels}"] == (1 << 20, 1_000)
    assert f"container_start_time_seconds{labels}" in got
    assert got["scrape_error"][0] == 0


def test_server_answers_each_node_on_its_own_path() -> None:
    """GET /metrics/resource/<node> answers that node; an unknown node is a 404."""
    with resourcemetrics.serving({"n1": USAGE}) as port:
        url = f"http://127.0.0.1:{port}{resourcemetrics.PREFIX}"
        with urllib.request.urlopen(url + "n1", timeout=10) as resp:
            text = resp.read().decode()
        assert "node_cpu_usage_seconds_total" in text
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + "n2", timeout=10)
        err.value.close()
        assert err.value.code == 404
    assert resourcemetrics.node_metadata_patch("n1") == {
        "metadata": {
            "annotations": {"metrics.k8s.io/resource-metrics-path": "/metrics/resource/n1"}
        }
    }
