"""LowNodeLoad anomaly detection: consecutive hot readings, per node, with a fake clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from descheduler.plugins.lownodeload.anomaly import AnomalyDetector, State, Status
from descheduler.plugins.lownodeload.args import AnomalyCondition
from descheduler.plugins.lownodeload.classify import Track
from kube.objects import NodeName
from tests.builders import T0

A, B = NodeName("A"), NodeName("B")
MINUTE = timedelta(minutes=1)
N3 = AnomalyCondition(
    timeout=timedelta(minutes=10), consecutive_abnormalities=3, consecutive_normalities=2
)


class Clock:
    """A fake clock advanced by hand: one reading per minute."""

    def __init__(self) -> None:
        self.now = T0

    def tick(self, by: timedelta = MINUTE) -> Clock:
        self.now += by
        return self


def _readings(
    detector: AnomalyDetector,
    clock: Clock,
    hot: list[bool],
    node: NodeName = A,
    condition: AnomalyCondition = N3,
) -> list[bool]:
    """Observe one reading per minute; return whether to act after each."""
    return [detector.observe(node, hot=h, now=clock.tick().now, condition=condition) for h in hot]


@pytest.mark.parametrize(
    ("hot", "acts"),
    [
        pytest.param([True, True, True], [False, False, True], id="third-hot-reading-acts"),
        pytest.param(
            [True, True, False, True, True, True],
            [False, False, False, False, False, True],
            id="a-cool-reading-resets-the-streak",
        ),
        pytest.param(
            [True, True, True, True, False, True],
            [False, False, True, True, False, True],
            id="abnormal-stays-through-one-cool-reading",
        ),
        pytest.param(
            [True, True, True, False, False, True],
            [False, False, True, False, False, False],
            id="consecutive-normalities-end-the-anomaly",
        ),
    ],
)
def test_state_machine(hot: list[bool], acts: list[bool]) -> None:
    """N=3 abnormal readings to act, M=2 normal readings to calm down."""
    assert _readings(AnomalyDetector(), Clock(), hot) == acts


def test_one_abnormality_acts_at_once() -> None:
    """consecutiveAbnormalities 1: the first hot reading makes a source (scenario D1)."""
    condition = AnomalyCondition(consecutive_abnormalities=1)
    assert _readings(AnomalyDetector(), Clock(), [True], condition=condition) == [True]


def test_nodes_are_independent() -> None:
    """Readings and resets of node A never touch node B's streak."""
    detector, clock = AnomalyDetector(), Clock()
    _readings(detector, clock, [True, True], node=A)
    _readings(detector, clock, [True, True], node=B)
    detector.reset(A)
    assert detector.status(A) == Status(State.NORMAL, 0)
    assert detector.status(B) == Status(State.NORMAL, 2)
    assert _readings(detector, clock, [True], node=B) == [True]
    assert _readings(detector, clock, [True], node=A) == [False]


def test_tracks_are_independent() -> None:
    """The prod track keeps its own streak."""
    detector, clock = AnomalyDetector(), Clock()
    detector.observe(A, hot=True, now=clock.tick().now, condition=N3, track=Track.PROD)
    detector.observe(A, hot=True, now=clock.tick().now, condition=N3)
    assert detector.status(A, Track.PROD) == Status(State.NORMAL, 1)
    detector.reset(A, Track.NODE)
    assert detector.status(A, Track.PROD) == Status(State.NORMAL, 1)
    detector.reset(A)
    assert detector.tracked == 0


def test_abnormal_state_times_out() -> None:
    """After `timeout` in ABNORMAL the node must prove itself again (Koordinator's timeout)."""
    condition = AnomalyCondition(timeout=timedelta(minutes=2), consecutive_abnormalities=3)
    detector, clock = AnomalyDetector(), Clock()
    assert _readings(detector, clock, [True] * 3, condition=condition) == [False, False, True]
    # still abnormal 2 minutes after it began, not after
    assert _readings(detector, clock, [True] * 3, condition=condition) == [True, True, False]


def test_record_is_forgotten_without_readings() -> None:
    """A streak not observed for `forget_after` (detectorCacheTimeout) starts over."""
    detector, clock = AnomalyDetector(forget_after=timedelta(minutes=5)), Clock()
    _readings(detector, clock, [True, True])
    clock.tick(timedelta(minutes=5))  # 6 minutes after the last reading
    assert _readings(detector, clock, [True]) == [False]
    assert detector.status(A) == Status(State.NORMAL, 1)


def test_record_survives_within_forget_after() -> None:
    """Readings 5 minutes apart keep the streak when forget_after is 5 minutes."""
    detector, clock = AnomalyDetector(forget_after=timedelta(minutes=5)), Clock()
    acts = [
        detector.observe(A, hot=True, now=clock.tick(timedelta(minutes=5)).now, condition=N3)
        for _ in range(3)
    ]
    assert acts == [False, False, True]


def test_prune_drops_stale_records() -> None:
    """prune forgets nodes not observed for forget_after (deleted nodes)."""
    detector, clock = AnomalyDetector(forget_after=timedelta(minutes=5)), Clock()
    _readings(detector, clock, [True], node=A)
    _readings(detector, clock.tick(timedelta(minutes=3)), [True], node=B)
    detector.prune(clock.tick(timedelta(minutes=2)).now)
    assert (detector.status(A).streak, detector.status(B).streak) == (0, 1)


def test_cool_readings_leave_no_record() -> None:
    """A node that is never hot costs no memory."""
    detector = AnomalyDetector()
    _readings(detector, Clock(), [False, False])
    assert detector.tracked == 0
