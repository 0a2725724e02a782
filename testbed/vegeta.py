"""vegeta, the open-loop HTTP load generator of `python -m bench interference` and of the
colocation scenario (`testbed.onlineserver`).

Built from the module pinned in hack/vegeta/go.mod by hack/build-vegeta.sh
(cached); `attack` sends GET requests at a constant rate for a fixed time and
returns vegeta's own figures: `vegeta report -type=json` for the request
count, success ratio, status codes, errors, p50 and p99, and `-type=hdrplot`
(the same latency estimator, at finer quantiles) for p99.9. vegeta is open
loop: it starts a request on schedule whether or not the earlier ones have
been answered (it adds workers when all are busy), so a slow server shows as
queueing delay in the latencies instead of as a lower request rate.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO / "hack" / "build-vegeta.sh"
REQUEST_TIMEOUT_S = 2.0
# The attack runs at nice -10: on a shared machine the generator's own scheduling
# delays would otherwise show as the server's latency.
ATTACK_NICE = -10
P999 = 0.999


class GeneratorError(RuntimeError):
    """vegeta could not be built or did not run; the message says what failed."""


@dataclass(frozen=True, slots=True)
class Report:
    """One attack's figures, latencies in milliseconds."""

    requests: int
    rate: float  # requests sent per second
    throughput: float  # successful responses per second
    success: float  # 0..1
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    status_codes: dict[str, int]
    errors: list[str]

    @property
    def failed(self) -> int:
        return round(self.requests * (1.0 - self.success))

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "rate": round(self.rate, 1),
            "throughput": round(self.throughput, 1),
            "success": round(self.success, 6),
            "errors": self.failed,
            "error_messages": self.errors,
            "status_codes": self.status_codes,
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "p999_ms": round(self.p999_ms, 3),
            "max_ms": round(self.max_ms, 3),
        }


def parse_hdrplot(text: str) -> list[tuple[float, float]]:
    """(quantile, latency ms) rows of `vegeta report -type=hdrplot`, in quantile order."""
    rows = []
    for line in text.splitlines()[1:]:  # the first line is the header
        fields = line.split()
        if len(fields) >= 2:
            rows.append((float(fields[1]), float(fields[0])))
    return sorted(rows)


def hdr_quantile(rows: list[tuple[float, float]], q: float) -> float:
    """The latency of the first row at or above quantile `q` (hdrplot's steps are
    logarithmic: 0.999023 is the first at or above 0.999)."""
    for quantile, millis in rows:
        if quantile >= q:
            return millis
    raise ValueError(f"no hdrplot row at or above quantile {q}")


def parse_report(json_text: str, hdrplot_text: str) -> Report:
    """vegeta's JSON report (latencies in ns) and its hdrplot, as one Report."""
    doc = json.loads(json_text)
    latencies = doc["latencies"]
    requests = int(doc["requests"])
    p999 = hdr_quantile(parse_hdrplot(hdrplot_text), P999) if requests else 0.0
    return Report(
        requests=requests,
        rate=float(doc["rate"]),
        throughput=float(doc["throughput"]),
        success=float(doc["success"]),
        p50_ms=latencies["50th"] / 1e6,
        p99_ms=latencies["99th"] / 1e6,
        p999_ms=p999,
        max_ms=latencies["max"] / 1e6,
        status_codes={str(k): int(v) for k, v in (doc.get("status_codes") or {}).items()},
        errors=sorted(set(doc.get("errors") or []))[:5],
    )


def find(script: Path = BUILD_SCRIPT) -> Path:
    """The vegeta binary, built (once, cached) by hack/build-vegeta.sh."""
    try:
        done = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    except OSError as err:
        raise GeneratorError(f"cannot run {script}: {err}") from err
    if done.returncode != 0:
        raise GeneratorError(done.stderr.strip() or f"{script} failed")
    binary = Path(done.stdout.strip().splitlines()[-1]) / "vegeta"
    if not binary.is_file():
        raise GeneratorError(f"{script} printed no directory holding vegeta")
    return binary


def attack(
    vegeta: Path,
    url: str,
    *,
    rate: int,
    seconds: float,
    workdir: Path,
    sent: Callable[[], object] | None = None,
) -> Report:
    """GET `url` at `rate` requests per second for `seconds`; vegeta's report. `sent` is
    called when the last answer is in, before the report is made (to end a measurement
    that brackets the load, not the report's own work)."""
    workdir.mkdir(parents=True, exist_ok=True)
    results = workdir / "attack.bin"
    argv = [
        str(vegeta),
        "attack",
        f"-rate={rate}/1s",
        f"-duration={seconds:g}s",
        f"-timeout={REQUEST_TIMEOUT_S:g}s",
        f"-output={results}",
    ]
    # As a browser asks: the server compresses the page for every request.
    target = f"GET {url}\nAccept-Encoding: gzip\n"
    # bounded: the attack's length, its last requests' timeout, and a margin
    _run(argv, stdin=target, timeout=seconds + REQUEST_TIMEOUT_S + 30, nice=ATTACK_NICE)
    if sent is not None:
        sent()
    report = _run([str(vegeta), "report", "-type=json", str(results)], timeout=60)
    hdrplot = _run([str(vegeta), "report", "-type=hdrplot", str(results)], timeout=60)
    return parse_report(report, hdrplot)


def _run(argv: list[str], *, timeout: float, stdin: str = "", nice: int = 0) -> str:
    def renice() -> None:
        with contextlib.suppress(OSError):  # raising priority needs root; else as is
            os.setpriority(os.PRIO_PROCESS, 0, nice)

    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            preexec_fn=renice if nice else None,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise GeneratorError(f"{' '.join(argv[:2])}: {err}") from err
    if done.returncode != 0:
        raise GeneratorError(
            f"{' '.join(argv[:2])} exited {done.returncode}: {done.stderr.strip()[-500:]}"
        )
    return done.stdout
