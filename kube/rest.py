"""A small JSON REST client over the `kubernetes` package's ApiClient.

Everything nodeqos sends to the API server goes through `Rest`: raw JSON in and
out (the generated model classes are slow to deserialize and drop CRD fields),
typed errors, a client-side token-bucket rate limit, and streaming for watches.
The `kubernetes` package is kept for what it does well: kubeconfig and
in-cluster credential loading. It is imported only when credentials are loaded:
its package `__init__` imports every generated model (about 600 modules, 25 MiB
of resident memory), which a standalone agent never needs. urllib3 is imported
when the first `Rest` is built, for the same reason (2.4 MiB).

Callers: kube.cache (list and watch), the agent's NodeMetric reporter and
evictor, the descheduler's evictor and leader election.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

if TYPE_CHECKING:
    import kubernetes.client
    import urllib3

JSON = Any
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """The API server answered with a non-2xx status."""

    def __init__(self, status: int, reason: str, message: str, body: JSON = None) -> None:
        super().__init__(f"HTTP {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def too_many_requests(self) -> bool:
        return self.status == 429


class ApiUnavailable(Exception):
    """The API server could not be reached (connection refused, reset, timeout)."""


class WriteRefused(ApiUnavailable):
    """A `Rest.guarded` client refused to send a write: this process may not act now.

    An ApiUnavailable, so every caller's retry path handles it unchanged.
    """


class TokenBucket:
    """Client-side rate limit, like client-go's flowcontrol: qps refill, burst capacity."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def wait_time(self) -> float:
        """Take a token; return how long the caller must wait before using it."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def take(self) -> None:
        delay = self.wait_time()
        if delay > 0:
            self._sleep(delay)


def api_client(kubeconfig: Path | str | None = None) -> kubernetes.client.ApiClient:
    """Credentials from the given kubeconfig, else in-cluster, else ~/.kube/config."""
    # Imported here, not at the top: costly (see the module docstring).
    import kubernetes.client
    import kubernetes.config

    config = kubernetes.client.Configuration()
    if kubeconfig:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=config
        )
    else:
        try:
            kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=config
            )
        except kubernetes.config.ConfigException:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                client_configuration=config
            )
    # Retries hide outages behind long stalls; our loops retry with their own backoff.
    config.retries = False
    return kubernetes.client.ApiClient(config)


class Rest:
    """JSON requests against one API server; thread-safe.

    Credentials and TLS settings come from a `kubernetes.client.Configuration`
    (kubeconfig or in-cluster); the HTTP itself is a urllib3 pool of our own, so
    behaviour does not change with the generated client's internals.
    """

    def __init__(
        self,
        client: kubernetes.client.ApiClient,
        *,
        qps: float = 50.0,
        burst: int = 100,
        timeout: float = 30.0,
        pool_size: int = 8,
    ) -> None:
        self.client = client
        config = client.configuration
        self._config = config
        self._host = str(config.host).rstrip("/")
        self._limit = TokenBucket(qps, burst) if qps > 0 else None
        self._timeout = timeout
        tls: dict[str, Any] = {}
        if config.verify_ssl:
            tls["cert_reqs"] = "CERT_REQUIRED"
            tls["ca_certs"] = config.ssl_ca_cert
        else:
            tls["cert_reqs"] = "CERT_NONE"
        if config.cert_file:
            tls["cert_file"] = config.cert_file
            tls["key_file"] = config.key_file
        if getattr(config, "tls_server_name", None):
            tls["server_hostname"] = config.tls_server_name
        import urllib3  # only now: see the module docstring

        self._pool = urllib3.PoolManager(num_pools=2, maxsize=pool_size, retries=False, **tls)
        self._may_write: Callable[[], bool] | None = None
        self._refusal = ""

    @classmethod
    def from_kubeconfig(cls, kubeconfig: Path | str | None = None, **kwargs: Any) -> Rest:
        return cls(api_client(kubeconfig), **kwargs)

    def guarded(self, may_write: Callable[[], bool], refusal: str) -> Rest:
        """This client, its connections and rate limit shared, refusing every write
        (anything but GET) while `may_write()` is false, checked the moment before it
        would be sent: a replica that stopped leading sends nothing, not even a write
        it queued while it led (issue #36). Raises WriteRefused(`refusal`)."""
        view = copy.copy(self)
        view._may_write = may_write
        view._refusal = refusal
        return view

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: JSON = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> JSON:
        resp = self._send(
            method, path, query, body, content_type, timeout or self._timeout, stream=False
        )
        data = resp.data
        return json.loads(data) if data else None

    def get(self, path: str, **query: str | int | bool) -> JSON:
        return self.request("GET", path, query=query)

    def create(self, path: str, body: JSON) -> JSON:
        return self.request("POST", path, body=body)

    def replace(self, path: str, body: JSON) -> JSON:
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: JSON, content_type: str = MERGE_PATCH) -> JSON:
        return self.request("PATCH", path, body=body, content_type=content_type)

    def delete(self, path: str, body: JSON = None) -> JSON:
        return self.request("DELETE", path, body=body)

    def stream_lines(
        self,
        path: str,
        query: Mapping[str, str | int | bool],
        *,
        read_timeout: float,
        opened: Callable[[urllib3.BaseHTTPResponse], None] | None = None,
    ) -> Iterator[bytes]:
        """GET a streaming endpoint (a watch) and yield its newline-separated records.

        `opened` receives the live response so another thread can `shutdown()` it
        to end a blocked read at once (how an informer stops promptly).
        """
        import urllib3  # already loaded by __init__: a dict lookup

        resp = self._send("GET", path, query, None, "application/json", read_timeout, stream=True)
        if opened is not None:
            opened(resp)
        pending = b""
        try:
            for chunk in resp.stream(64 * 1024, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield line
            if pending.strip():
                yield pending
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise ApiUnavailable(f"GET {path}: stream broke: {err}") from err
        finally:
            resp.release_conn()

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "Content-Type": content_type,
            "User-Agent": "nodeqos",
        }
        hook = getattr(self._config, "refresh_api_key_hook", None)
        if hook is not None:  # exec plugins and expiring tokens refresh here
            hook(self._config)
        for setting in self._config.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        return headers

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | int | bool] | None,
        body: JSON,
        content_type: str,
        timeout: float,
        *,
        stream: bool,
    ) -> urllib3.BaseHTTPResponse:
        import urllib3  # already loaded by __init__: a dict lookup

        if self._limit is not None:
            self._limit.take()
        if method != "GET" and self._may_write is not None and not self._may_write():
            raise WriteRefused(f"{method} {path}: {self._refusal}")
        url = self._host + path
        if query:
            url += "?" + urlencode({k: _query_value(v) for k, v in query.items()})
        payload = None if body is None else json.dumps(body).encode()
        try:
            resp = self._pool.request(
                method,
                url,
                body=payload,
                headers=self._headers(content_type),
                preload_content=not stream,
                timeout=urllib3.Timeout(connect=min(timeout, 10.0), read=timeout),
            )
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise ApiUnavailable(f"{method} {path}: {err}") from err
        if not 200 <= resp.status < 300:
            data = resp.data if not stream else resp.read()
            resp.release_conn()
            raise _api_error(method, path, resp.status, str(resp.reason), data)
        return resp


def _query_value(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _api_error(method: str, path: str, status: int, reason: str, data: bytes) -> ApiError:
    body: JSON = None
    message = reason
    if data:
        try:
            body = json.loads(data)
        except ValueError:
            message = data[:500].decode(errors="replace")
        else:
            if isinstance(body, dict):
                message = str(body.get("message", message))
                reason = str(body.get("reason", reason))
    return ApiError(status, reason, f"{method} {path}: {message}", body)


def object_path(
    group: str,
    version: str,
    plural: str,
    name: str | None = None,
    *,
    namespace: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a resource: core group is ''. Names are URL-quoted."""
    base = f"/api/{version}" if group == "" else f"/apis/{group}/{version}"
    if namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{plural}"
    if name is not None:
        base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
    return base
