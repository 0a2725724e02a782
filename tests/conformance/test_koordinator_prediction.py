"""Koordinator's peak-predictor and histogram tables, case by case, against nodeqos.

Sources, koordinator-sh/koordinator at commit a7a1b76bbf81abd26f9c377de1f31a60dd965f6e:

- `pkg/util/histogram/histogram_options_test.go`, `histogram_test.go`,
  `decaying_histogram_test.go` against `metriccache.histogram`;
- `pkg/koordlet/prediction/predict_server_test.go` `TestDefaultHistogram`
  against `agent.predictor`'s bucket layouts;
- `pkg/koordlet/prediction/peak_predictor_test.go` (`TestProdReclaimablePredictor_AddPod`,
  `TestPodReclaimablePredictor`, `TestPodReclaimablePredictor_GetPeak`,
  `Test_priorityReclaimablePredictor`) against `agent.peak.prod_reclaimable`.

Inputs and expected outputs are copied as data: the Go tests' mock predict
server becomes the prediction maps, a pod's `CreationTimestamp` its age.
The `Merge` cases (`TestHistogramMerge`, `TestDecayingHistogramMerge`) are not
replayed: nodeqos's histograms have no merge, nothing in the predictor needs
one (docs/deviations.md, `histogram-merge`).
"""

from __future__ import annotations

import math

import pytest

from agent import peak, predictor
from kube import classify, quantity
from metriccache import histogram as hist

FILE = "koordinator pkg/util/histogram, pkg/koordlet/prediction @ a7a1b76b"
WEIGHT_EPS = 1e-15  # histogram_test.go weightEpsilon
VALUE_EPS = 1e-15  # valueEpsilon (relative)
LINEAR = hist.linear_buckets(10.0, 1.0, WEIGHT_EPS)  # testHistogramOptions
START = 1234567890.0  # decaying_histogram_test.go startTime
HOUR = 3600.0
Mi = 1024 * 1024
Gi = 1024 * Mi
PROD = classify.PriorityClass.PROD
BATCH = classify.PriorityClass.BATCH
NONE = classify.PriorityClass.NONE


def _close(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=VALUE_EPS)


# -- histogram_options_test.go ------------------------------------------------------------


def test_linear_histogram_options() -> None:
    """TestLinearHistogramOptions: 18 buckets of 0.3 up to 5.0."""
    o = hist.linear_buckets(5.0, 0.3, 0.001)
    assert o.count == 18
    assert o.start(0) == 0.0
    assert _close(o.start(17), 5.1)
    assert [o.find(v) for v in (-1.0, 0.0, 1.3, 100.0)] == [0, 0, 4, 17]


def test_exponential_histogram_options() -> None:
    """TestExponentialHistogramOptions: 6 buckets from 40 growing 1.5x up to 500."""
    o = hist.exponential_buckets(500.0, 40.0, 1.5, 0.001)
    assert o.count == 6
    assert [o.start(b) for b in range(6)] == [0.0, 40.0, 100.0, 190.0, 325.0, 527.5]
    assert [o.find(v) for v in (-1.0, 39.99, 40.0, 100.0, 900.0)] == [0, 0, 1, 2, 5]


# -- histogram_test.go ----------------------------------------------------------------------


def test_percentiles_empty_histogram() -> None:
    """TestPercentilesEmptyHistogram: 0 for any percentile."""
    h = hist.Histogram(LINEAR)
    assert [h.percentile(p) for p in (-0.5, 0.0, 0.5, 1.0, 1.5)] == [0.0] * 5


PERCENTILES = [(0.0, 2), (0.1, 2), (0.2, 3), (0.3, 3), (0.4, 4), (0.5, 4), (0.6, 4)]
PERCENTILES += [(0.7, 5), (0.8, 5), (0.9, 5), (1.0, 5)]


def test_percentiles() -> None:
    """TestPercentiles: {1: 1, 2: 2, 3: 3, 4: 4}."""
    h = hist.Histogram(LINEAR)
    for i in range(1, 5):
        h.add(float(i), float(i))
    assert all(_close(h.percentile(p), want) for p, want in PERCENTILES)


def test_percentile_out_of_bounds() -> None:
    """TestPercentileOutOfBounds: below 0 is the minimum, above 1 the maximum."""
    h = hist.Histogram(hist.linear_buckets(1.0, 0.1, WEIGHT_EPS))
    h.add(0.1, 0.1)
    h.add(0.2, 0.2)
    assert _close(h.percentile(-0.1), 0.2) and _close(h.percentile(1.1), 0.3)
    h.add(0.0, 0.1)
    h.add(1.0, 0.2)
    assert _close(h.percentile(-0.1), 0.1) and _close(h.percentile(1.1), 1.0)


def test_empty_histogram() -> None:
    """TestEmptyHistogram: empty below epsilon after subtractions."""
    h = hist.Histogram(hist.linear_buckets(1.0, 0.1, WEIGHT_EPS))
    assert h.is_empty()
    h.add(0.1, WEIGHT_EPS * 2.5)
    assert not h.is_empty()
    h.subtract(0.1, WEIGHT_EPS)
    assert not h.is_empty()
    h.subtract(0.1, WEIGHT_EPS)
    assert h.is_empty()


def test_non_empty_on_epsilon_addition() -> None:
    """TestNonEmptyOnEpsilonAddition: a light sample does not empty a histogram."""
    h = hist.Histogram(hist.linear_buckets(1.0, 0.1, WEIGHT_EPS))
    h.add(9.9, WEIGHT_EPS * 3)
    assert not h.is_empty()
    h.add(0.1, WEIGHT_EPS * 0.3)
    assert not h.is_empty()
    h.add(999.9, WEIGHT_EPS * 0.3)
    assert not h.is_empty()


@pytest.mark.parametrize(
    ("samples", "total", "weights"),
    [
        pytest.param([], 0.0, {}, id="TestHistogramSaveToCheckpointEmpty"),
        pytest.param([(1.0, 1.0)], 1.0, {1: 10000}, id="TestHistogramSaveToCheckpoint"),
        pytest.param(
            [(1.0, 1.0), (2.0, 100000.0)],
            100001.0,
            {2: 10000},
            id="TestHistogramSaveToCheckpointDropsRelativelySmallValues",
        ),
        pytest.param(
            [(1.0, 1.0), (2.0, 10000.0), (3.0, 50.0)],
            10051.0,
            {1: 1, 2: 10000, 3: 50},
            id="TestHistogramSaveToCheckpointForMultipleValues",
        ),
    ],
)
def test_save_to_checkpoint(
    samples: list[tuple[float, float]], total: float, weights: dict[int, int]
) -> None:
    """The checkpoint scales the heaviest bucket to 10,000 and drops what rounds to 0."""
    h = hist.Histogram(LINEAR)
    for value, weight in samples:
        h.add(value, weight)
    assert h.total == total
    assert h.checkpoint_weights() == weights


def test_load_from_checkpoint() -> None:
    """TestHistogramLoadFromCheckpoint: weights rescaled to the total."""
    h = hist.Histogram(LINEAR)
    h.load_weights({0: 1, 1: 2}, 6.0)
    assert h.total == 6.0 and h.weight(0) == 2.0 and h.weight(1) == 4.0


@pytest.mark.parametrize(
    ("weights", "total"),
    [
        pytest.param(
            {-1: 1}, 1.0, id="TestHistogramLoadFromCheckpointReturnsErrorOnNegativeBucket"
        ),
        pytest.param({99: 1}, 1.0, id="TestHistogramLoadFromCheckpointReturnsErrorOnInvalidBucket"),
        pytest.param({}, -1.0, id="TestHistogramLoadFromCheckpointReturnsErrorNegativeTotaWeight"),
    ],
)
def test_load_from_checkpoint_refuses(weights: dict[int, int], total: float) -> None:
    """A bucket outside the layout or a negative total is an error."""
    with pytest.raises(hist.CheckpointError):
        hist.Histogram(LINEAR).load_weights(weights, total)


def test_load_from_checkpoint_refuses_nothing() -> None:
    """TestHistogramLoadFromCheckpointReturnsErrorOnNilInput."""
    with pytest.raises(hist.CheckpointError):
        hist.DecayingHistogram.from_checkpoint(None, LINEAR, HOUR)


# -- decaying_histogram_test.go ---------------------------------------------------------------


def test_percentiles_empty_decaying_histogram() -> None:
    """TestPercentilesEmptyDecayingHistogram."""
    h = hist.DecayingHistogram(LINEAR, HOUR)
    assert [h.percentile(p) for p in (-0.5, 0.0, 0.5, 1.0, 1.5)] == [0.0] * 5


def test_simple_decay() -> None:
    """TestSimpleDecay: a heavy sample is almost forgotten 20 half-lives later."""
    h = hist.DecayingHistogram(LINEAR, HOUR)
    h.add(2, 1000, START)
    h.add(1, 1, START + 20 * HOUR)
    assert _close(h.percentile(0.999), 2) and _close(h.percentile(1.0), 3)


def test_longterm_decay() -> None:
    """TestLongtermDecay: past 2^100 the histogram renormalises (the old sample vanishes)."""
    h = hist.DecayingHistogram(LINEAR, HOUR)
    h.add(2, 1, START)
    h.add(1, 1, START + 101 * HOUR)
    assert _close(h.percentile(1.0), 2)


def test_decaying_histogram_percentiles() -> None:
    """TestDecayingHistogramPercentiles: weights 1..4, one half-life apart."""
    h = hist.DecayingHistogram(LINEAR, HOUR)
    for i in range(1, 5):
        h.add(float(i), float(i), START + (i - 1) * HOUR)
    want = [(0.0, 2), (0.02, 2), (0.03, 3), (0.10, 3), (0.11, 4), (0.34, 4), (0.35, 5), (1.0, 5)]
    assert all(_close(h.percentile(p), v) for p, v in want)


def test_no_decay() -> None:
    """TestNoDecay: at one instant it is a plain histogram."""
    h = hist.DecayingHistogram(LINEAR, HOUR)
    for i in range(1, 5):
        h.add(float(i), float(i), START)
    assert all(_close(h.percentile(p), want) for p, want in PERCENTILES)


def test_decaying_histogram_save_to_checkpoint() -> None:
    """TestDecayingHistogramSaveToCheckpoint: the reference time travels with the weights."""
    h = hist.DecayingHistogram(LINEAR, HOUR)
    h.add(2, 1, START + 100 * HOUR)
    assert h.reference is not None
    ckpt = h.to_checkpoint()
    assert ckpt["reference"] == h.reference and ckpt["buckets"] and ckpt["total"]


def test_decaying_histogram_load_from_checkpoint() -> None:
    """TestDecayingHistogramLoadFromCheckpoint: 2018-01-02T03:04:05Z, one bucket."""
    reference = 1514862245.0
    raw = hist.DecayingHistogram(LINEAR, HOUR).to_checkpoint()
    raw.update(total=6.0, buckets={"0": 1}, reference=reference)
    h = hist.DecayingHistogram.from_checkpoint(raw, LINEAR, HOUR)
    assert not h.is_empty() and h.reference == reference


# -- predict_server_test.go -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("buckets", "low", "high"),
    [
        pytest.param(predictor.CPU_BUCKETS, 0.05, 1024.0, id="TestDefaultHistogram cpu"),
        pytest.param(predictor.MEMORY_BUCKETS, float(10 << 20), float(1 << 31), id="memory"),
    ],
)
def test_default_histogram(buckets: hist.Buckets, low: float, high: float) -> None:
    """TestDefaultHistogram: min and max read back within the 5% bucket growth."""
    h = hist.DecayingHistogram(buckets, HOUR)
    h.add(low, 1, START)
    h.add(high, 1, START)
    assert abs(h.percentile(1.0) - high) / high <= 0.05
    assert abs(h.percentile(0.0) - low) / low <= 0.05


# -- peak_predictor_test.go -----------------------------------------------------------------


def _pod(
    uid: str,
    cpu: int,
    memory: int,
    *,
    priority: classify.PriorityClass = PROD,
    age: float = 2 * HOUR,
    terminating: bool = False,
) -> peak.PodInput:
    return peak.PodInput(
        uid=uid,
        priority=priority,
        cpu_request=cpu,
        memory_request=memory,
        age=age,
        terminating=terminating,
    )


def _res(cpu: int, memory: int) -> quantity.Resources:
    return quantity.Resources({quantity.CPU: cpu, quantity.MEMORY: memory})


ZERO = peak.Prediction(0, 0)
# testPredictionResult: p95 500m / 512Mi, p98 800m / 768Mi; the formula reads p95 CPU, p98 memory
TEST_PREDICTION = peak.Prediction(500, 768 * Mi)
SYS = peak.Prediction(300, 512 * Mi)  # sysPrediction p95 cpu, p98 memory
PROD_1000 = peak.Prediction(1000, 1 * Gi)  # TestProdReclaimablePredictor_AddPod prodPrediction
POD_500 = peak.Prediction(500, 1 * Gi)  # its podPrediction

# TestProdReclaimablePredictor_AddPod: pod1 cold start, pod2 normal, pod3 (no priority) deleted
ADD_POD_PODS = [
    _pod("pod-1-uid", 1000, 1 * Gi, age=60),
    _pod("pod-2-uid", 2000, 2 * Gi),
    _pod("pod-3-uid", 2000, 2 * Gi, priority=NONE, terminating=True),
]
N1 = int(1.1 * 1024 * 1024 * 1024)
N2 = int(1.1 * 1536 * 1024 * 1024)


@pytest.mark.parametrize(
    ("allocatable", "by_pod", "by_class"),
    [
        pytest.param(
            _res(3000, 3 * Gi),
            _res(1450, 2 * Gi - N1),
            _res(1570, 3 * Gi - N2),
            id="node allocatable == pods' requests",
        ),
        pytest.param(
            _res(8000, 8 * Gi),
            _res(1450, 2 * Gi - N1),
            _res(1570, 3 * Gi - N2),
            id="node allocatable > pods' requests",
        ),
        pytest.param(
            _res(1000, 1 * Gi),
            _res(450, 0),
            _res(0, 0),
            id="node allocatable < pods' requests",
        ),
    ],
)
def test_prod_reclaimable_predictor_add_pod(
    allocatable: quantity.Resources, by_pod: quantity.Resources, by_class: quantity.Resources
) -> None:
    """TestProdReclaimablePredictor_AddPod: both estimates, their minimum, the larger peak."""
    got = peak.prod_reclaimable(
        ADD_POD_PODS,
        {"pod-1-uid": POD_500, "pod-2-uid": POD_500, "pod-3-uid": ZERO},
        {PROD: PROD_1000, NONE: ZERO},
        SYS,
        allocatable,
        cold_start=HOUR,
        margin_percent=10,
    )
    assert got.by_pod == by_pod and got.by_class == by_class
    assert got.reclaimable == {k: min(by_pod[k], by_class[k]) for k in by_pod}
    assert got.peak == {k: max(got.pod_peak[k], got.class_peak[k]) for k in by_pod}


POD_PREDICTOR_PODS = [
    _pod("pod-1-uid", 1000, 1 * Gi, age=60),  # cold start
    _pod("pod-2-uid", 2000, 2 * Gi),
    _pod("pod-3-uid", 2000, 2 * Gi, terminating=True),
    _pod("pod-4-uid", 2000, 2 * Gi, priority=BATCH),
]
PEAK_768 = int(1.1 * 768 * Mi)


@pytest.mark.parametrize(
    ("allocatable", "expected"),
    [
        pytest.param(
            _res(3000, 3 * Gi), _res(2000 - 550, 2 * Gi - PEAK_768), id="node allocatable > req"
        ),
        pytest.param(
            _res(1000, 1 * Gi), _res(1000 - 550, 1 * Gi - PEAK_768), id="node allocatable < req"
        ),
    ],
)
def test_pod_reclaimable_predictor(
    allocatable: quantity.Resources, expected: quantity.Resources
) -> None:
    """TestPodReclaimablePredictor: the per-pod estimate (Batch, cold and deleted pods skipped)."""
    got = peak.prod_reclaimable(
        POD_PREDICTOR_PODS,
        {p.uid: TEST_PREDICTION for p in POD_PREDICTOR_PODS},
        {},
        None,
        allocatable,
        cold_start=HOUR,
        margin_percent=10,
    )
    assert got.by_pod == expected


def test_pod_reclaimable_predictor_get_peak() -> None:
    """TestPodReclaimablePredictor_GetPeak: cold and unpredicted pods count their requests."""
    pods = [
        _pod("pod-cold-start-uid", 1000, 1 * Gi, age=60),
        _pod("pod-normal-uid", 2000, 2 * Gi),
        _pod("pod-predict-failed-uid", 500, 512 * Mi),
    ]
    got = peak.prod_reclaimable(
        pods,
        {"pod-normal-uid": TEST_PREDICTION},
        {},
        None,
        _res(0, 0),
        cold_start=HOUR,
        margin_percent=10,
    )
    assert got.pod_peak == _res(550 + 1000 + 500, PEAK_768 + 1 * Gi + 512 * Mi)


@pytest.mark.parametrize(
    ("allocatable", "expected"),
    [
        pytest.param(_res(3000, 3 * Gi), _res(1000 - 800, (2048 - 1536) * Mi), id="alloc > req"),
        pytest.param(_res(900, 1 * Gi), _res(900 - 800, 0), id="alloc < req"),
    ],
)
def test_priority_reclaimable_predictor(
    allocatable: quantity.Resources, expected: quantity.Resources
) -> None:
    """Test_priorityReclaimablePredictor: system + Prod class, margin 0, the Batch pod ignored."""
    pods = [
        _pod("pod-1-uid", 1000, 2048 * Mi, age=60),
        _pod("pod-2-uid", 0, 0, priority=BATCH),  # requests batch-cpu / batch-memory only
    ]
    prod = peak.Prediction(500, 1024 * Mi)  # prodPrediction, also the pod's own
    got = peak.prod_reclaimable(
        pods,
        {"pod-1-uid": prod},
        {PROD: prod, NONE: ZERO},
        SYS,
        allocatable,
        cold_start=0.0,  # the per-class estimate has no cold start
        margin_percent=0,
    )
    assert got.by_class == expected
