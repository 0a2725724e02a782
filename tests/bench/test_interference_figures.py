"""`python -m bench interference`'s figures: vegeta's reports read, the arms' order,
the per-arm medians, the goal, the table, the PNG plot and the nginx image's libraries."""

from __future__ import annotations

import struct
import textwrap
import zlib
from pathlib import Path
from typing import Any

import pytest

from bench import _interference_arms as arms
from bench import _interference_cluster as onenode
from bench import _interference_results as results
from bench import _pngplot
from testbed import ociimage
from testbed import vegeta as _vegeta

# `vegeta report -type=json` and the head and tail of `-type=hdrplot` of one real attack.
REPORT_JSON = (
    '{"latencies":{"total":441967437,"mean":4419674,"50th":2802433,"90th":8799137,'
    '"95th":11742569,"99th":34422720,"max":44982442,"min":1906425},"requests":100,'
    '"rate":50.4479179576972,"throughput":50.383078568172806,"success":0.98,'
    '"status_codes":{"200":98,"0":2},"errors":["Get \\"http://x/\\": timeout","Get \\"http://x/\\": timeout"]}'
)
HDRPLOT = textwrap.dedent(
    """\
    Value(ms)  Percentile  TotalCount  1/(1-Percentile)
    1.906425   0.000000    0           1.000000
    34.100000  0.998828    100         853.333333
    40.500000  0.999023    100         1024.000000
    44.982442  1.000000    100         +Inf
    """
)


def test_vegeta_report_gives_p50_p99_from_json_and_p999_from_hdrplot() -> None:
    """p50/p99 come from the JSON report (ns), p99.9 from the first hdrplot row >= 0.999."""
    report = _vegeta.parse_report(REPORT_JSON, HDRPLOT)
    assert (report.p50_ms, report.p99_ms, report.p999_ms) == (2.802433, 34.42272, 40.5)
    assert report.requests == 100 and report.failed == 2
    assert report.status_codes == {"200": 98, "0": 2}
    assert report.errors == ['Get "http://x/": timeout']  # deduplicated


def test_hdr_quantile_refuses_a_plot_without_the_quantile() -> None:
    """A plot stopping short of the quantile is an error, never a made-up figure."""
    with pytest.raises(ValueError, match=r"0\.999"):
        _vegeta.hdr_quantile([(0.5, 1.0), (0.99, 2.0)], 0.999)


def test_real_vegeta_attacks_at_the_rate_asked(page: str, tmp_path: Path) -> None:
    """vegeta from hack/build-vegeta.sh, 40 req/s for 2 s at a real server: ~80 requests,
    all answered, and quantiles in order."""
    report = _vegeta.attack(_vegeta.find(), page, rate=40, seconds=2, workdir=tmp_path)
    assert 76 <= report.requests <= 84
    assert report.success == 1.0 and report.status_codes == {"200": report.requests}
    assert 0 < report.p50_ms <= report.p99_ms <= report.p999_ms <= report.max_ms


def test_every_round_rotates_the_base_order() -> None:
    """Round r runs the base order (1, 2, 3, 5, 4) shifted by r: each arm leads once."""
    orders = [[a.number for a in arms.round_order(arms.ARMS, r)] for r in range(3)]
    assert orders == [[1, 2, 3, 5, 4], [2, 3, 5, 4, 1], [3, 5, 4, 1, 2]]


def test_threshold_is_65_percent_of_the_pods_cpu_on_top_of_the_reserved_one() -> None:
    """(1 reserved CPU + 0.65 x 1 pod CPU) / 2 CPUs of capacity, rounded up."""
    assert onenode.THRESHOLD_PERCENT == 83


def record(arm: int, p99: float, cpu: float, **extra: Any) -> dict[str, Any]:
    base = {
        "arm": arm,
        "arm_name": f"arm {arm}",
        "p50_ms": p99 / 3,
        "p99_ms": p99,
        "p999_ms": p99 * 1.5,
        "node_cpu_percent": cpu,
        "online_cpu_percent": 27.0,
        "batch_cpu_percent": cpu - 27.0,
        "errors": 0,
        "requests": 1000,
    }
    return {**base, **extra}


def test_goal_met_by_an_arm_within_bounds_and_clear_of_arm_2() -> None:
    """Arm 4 at 70 % CPU, p99 1.05x alone, well under arm 2: met; arm 3 at 45 % is not."""
    records = [
        *(record(1, p, 28.0) for p in (1.0, 1.1, 1.0)),
        *(record(2, p, 99.0) for p in (5.0, 6.0, 5.5)),
        *(record(3, p, 45.0) for p in (1.0, 1.0, 1.1)),
        *(record(4, p, 70.0) for p in (1.05, 1.0, 1.1)),
    ]
    summary = results.summarize(records)
    assert summary[2]["p99_ms"] == 5.5 and summary[2]["p99_spread_ms"] == 1.0
    goal = results.goal(summary)
    assert goal["met"] and goal["best_arm"] == "4"
    assert goal["arms"]["4"]["met"] and not goal["arms"]["3"]["node_cpu_at_least_60_percent"]


def test_goal_missed_when_the_gain_over_arm_2_is_inside_the_spread() -> None:
    """p99 better than arm 2's, but by less than the rounds' spread: not met."""
    records = [
        *(record(1, p, 28.0) for p in (1.0, 1.0, 1.0)),
        *(record(2, p, 99.0) for p in (1.0, 1.2, 3.0)),
        *(record(3, p, 80.0) for p in (1.0, 1.05, 1.1)),
    ]
    goal = results.goal(results.summarize(records))
    assert not goal["met"]
    assert not goal["arms"]["3"]["p99_better_than_arm_2_by_more_than_spread"]


def test_goal_refuses_figures_from_arms_that_dropped_requests() -> None:
    """Latency of a run that timed requests out hides them: over 0.1 % errors, no goal."""
    lossy = [record(1, 1.0, 28.0), record(2, 5.0, 99.0), record(3, 1.0, 80.0, errors=2)]
    assert not results.goal(results.summarize(lossy))["arms"]["3"]["errors_at_most_0_1_percent"]
    assert results.goal(results.summarize([*lossy[:2], record(3, 1.0, 80.0, errors=1)]))["met"]
    overloaded = [record(1, 1.0, 28.0, errors=50), record(2, 5.0, 99.0), record(3, 1.0, 80.0)]
    goal = results.goal(results.summarize(overloaded))
    assert not goal["met"] and "rate is too high" in goal["why"]


def test_table_has_one_row_per_arm_with_the_ratio_to_alone() -> None:
    summary = results.summarize([record(1, 2.0, 28.0), record(2, 5.0, 99.0)])
    rows = results.table(summary).splitlines()
    assert len(rows) == 4
    assert rows[3].startswith("| 2. arm 2 | 99% |") and "| 2.50x |" in rows[3]


def _decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks: dict[bytes, bytes] = {}
    at = 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert crc == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        at += 12 + length
    width, height, depth, color, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, color) == (8, 2)
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + 3 * width
    rows = [raw[i * stride : (i + 1) * stride] for i in range(height)]
    assert all(row[0] == 0 for row in rows)  # filter 0
    return width, height, [row[1:] for row in rows]


def test_png_is_valid_and_holds_the_canvas_pixels() -> None:
    """The PNG decodes (signature, CRCs, IHDR, filter bytes) back to the canvas."""
    canvas = _pngplot.Canvas(5, 3)
    canvas.set(2, 1, (10, 20, 30))
    width, height, rows = _decode_png(_pngplot.png_bytes(canvas))
    assert (width, height) == (5, 3)
    assert rows[1][6:9] == bytes((10, 20, 30)) and rows[0][:3] == b"\xff\xff\xff"


def test_plot_draws_each_arm_in_its_own_colour() -> None:
    """Two arms, two rounds each: both palette colours appear in the image."""
    records = [
        record(1, 1.0, 28.0),
        record(1, 1.2, 29.0),
        record(2, 5.0, 99.0),
        record(2, 6.0, 98.0),
    ]
    _, _, rows = _decode_png(results.plot(records, rate=1000))
    pixels = {bytes(row[i : i + 3]) for row in rows for i in range(0, len(row), 3)}
    assert bytes(_pngplot.PALETTE[0]) in pixels and bytes(_pngplot.PALETTE[1]) in pixels


def test_ldd_output_gives_every_library_and_the_loader() -> None:
    text = textwrap.dedent(
        """\
        \tlinux-vdso.so.1 (0x00007ffd4b7e0000)
        \tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f1)
        \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)
        """
    )
    assert ociimage.parse_ldd(text) == [
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/lib64/ld-linux-x86-64.so.2",
    ]


def test_ldd_output_with_a_missing_library_is_an_error() -> None:
    with pytest.raises(ociimage.ImageError, match="libpcre2"):
        ociimage.parse_ldd("\tlibpcre2-8.so.0 => not found\n")


def test_a_dynamic_binary_image_carries_its_libraries() -> None:
    """The image of a real dynamic binary of this host (python3's) holds what ldd lists."""
    import sys

    binary = Path(sys.executable).resolve()
    image = ociimage.nginx_image("t", nginx=binary)
    for library in ociimage.shared_objects(binary):
        assert library.lstrip("/") in image.files
    assert "etc/nginx/nginx.conf" in image.files and image.entrypoint[0] == str(binary)
