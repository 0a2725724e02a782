"""The API server's Kubernetes version, and the minors nodeqos supports (issue 35).

Every daemon that talks to the API server asks `GET /version` once at start
(`check`): it logs what it found, warns on a minor newer than the newest tested
one, and raises `UnsupportedServer` for one older than `OLDEST`, which each daemon
turns into its start-up error (exit 2). A server that does not answer, or answers
something that is not a version, is logged and let through: the daemons' own
outage handling takes over, and refusing to start because the network blinked
would be worse than running against a server of an unknown minor.

Managed clusters append to the minor and the git version (GKE answers minor "34+"
and gitVersion "v1.34.2-gke.1234000"); only the leading digits count.

May import: `kube.rest` (a foundation otherwise).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube import rest

log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class Minor:
    """A Kubernetes release line, 1.34."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


OLDEST = Minor(1, 34)  # the oldest minor the three big managed offerings still run
NEWEST = Minor(1, 37)  # the newest one built and tested here (hack/)
CHECK_TIMEOUT = 10.0  # seconds: one GET at start, never a long stall

_LEADING_DIGITS = re.compile(r"\d+")


class UnsupportedServer(Exception):
    """The API server is older than `OLDEST`; the message says what to do."""


@dataclass(frozen=True)
class ServerVersion:
    """What `GET /version` said: the minor, and the git version as the server spells it."""

    minor: Minor
    git_version: str

    def __str__(self) -> str:
        return self.git_version or str(self.minor)


def parse(info: Mapping[str, Any]) -> ServerVersion:
    """The version in a `/version` body; ValueError when it holds none."""
    git_version = str(info.get("gitVersion") or "")
    try:
        major = _leading_int(info.get("major"))
        minor = _leading_int(info.get("minor"))
    except ValueError:
        # some distributions leave major/minor empty: the git version still says it
        found = re.match(r"v?(\d+)\.(\d+)", git_version)
        if found is None:
            raise ValueError(f"no version in {dict(info)!r}") from None
        major, minor = int(found[1]), int(found[2])
    return ServerVersion(Minor(major, minor), git_version)


def _leading_int(value: object) -> int:
    found = _LEADING_DIGITS.match(str(value or ""))
    if found is None:
        raise ValueError(f"not a version number: {value!r}")
    return int(found[0])


def supported_range() -> str:
    return f"{OLDEST}-{NEWEST}"


def check(client: rest.Rest, component: str) -> ServerVersion | None:
    """Log the server's version; raise `UnsupportedServer` when it is older than OLDEST.
    None when the server did not say (unreachable, or an answer without a version)."""
    try:
        info = client.request("GET", "/version", timeout=CHECK_TIMEOUT)
    except (rest.ApiError, rest.ApiUnavailable) as err:
        log.warning(
            "%s: cannot read the API server's version (%s); carrying on (supported: Kubernetes %s)",
            component,
            err,
            supported_range(),
        )
        return None
    try:
        version = parse(info if isinstance(info, Mapping) else {})
    except ValueError as err:
        log.warning(
            "%s: the API server's /version holds no version (%s); carrying on", component, err
        )
        return None
    if version.minor < OLDEST:
        raise UnsupportedServer(
            f"the API server runs Kubernetes {version}, older than {OLDEST}: {component} "
            f"supports Kubernetes {supported_range()}. Upgrade the cluster to {OLDEST} or later "
            "(docs/compatibility.md says what each minor needs)"
        )
    if version.minor > NEWEST:
        log.warning(
            "%s: the API server runs Kubernetes %s, newer than %s, the newest minor nodeqos "
            "is tested on (supported: %s); carrying on",
            component,
            version,
            NEWEST,
            supported_range(),
        )
    else:
        log.info(
            "%s: the API server runs Kubernetes %s (supported: %s)",
            component,
            version,
            supported_range(),
        )
    return version
