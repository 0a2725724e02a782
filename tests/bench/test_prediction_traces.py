"""bench/prediction.py's traces are reproducible and shaped as its docstring says."""

from __future__ import annotations

import itertools

from bench import prediction


def _day(name: str, day: int) -> list[list[tuple[float, float]]]:
    rows = prediction.trace(name)
    return list(itertools.islice(rows, day * prediction.DAY, (day + 1) * prediction.DAY))


def test_the_same_seed_gives_the_same_trace() -> None:
    """Two runs replay identical numbers; another seed does not."""
    first = list(itertools.islice(prediction.trace("diurnal"), 50))
    assert first == list(itertools.islice(prediction.trace("diurnal"), 50))
    assert first != list(itertools.islice(prediction.trace("diurnal", seed=1), 50))


def test_the_step_trace_steps_up_on_day_four() -> None:
    """Day 4's mean CPU is about 1.6x day 3's in `step`, unchanged in `diurnal`."""

    def mean_cpu(name: str, day: int) -> float:
        rows = _day(name, day)
        return sum(cpu for row in rows for cpu, _ in row) / len(rows)

    assert 1.4 < mean_cpu("step", 3) / mean_cpu("step", 2) < 1.8
    assert 0.85 < mean_cpu("diurnal", 3) / mean_cpu("diurnal", 2) < 1.15
