"""A fleet's GPUs read from Prometheus (which scrapes dcgm-exporter), over its HTTP API with httpx.

Queries are fleet-wide: one instant query per metric for all GPUs (`/api/v1/query`), server-side
downsampled ranges for history (`/api/v1/query_range`, a step keeping every series under
Prometheus' 11,000 points), and `/api/v1/series` to list what exists. Never one query per GPU.
The same API is served by Thanos, Mimir and VictoriaMetrics, so the same code reads them.

A fleet with `via` reaches a Prometheus that only listens inside the cluster through an SSH port
forward over an existing host profile. Credentials come from the keyring (bearer token or basic
auth) and never reach logs, errors or output. TLS trusts certifi's bundle, or the fleet's own CA
file; a client certificate and key (files) answer a server that asks for one; `insecure` skips
verification and every view of the fleet says so. A tenant is sent as `X-Scope-OrgID` (Mimir,
Cortex, Loki-style multi-tenant proxies; Thanos receive and VictoriaMetrics cluster's vmauth can
map it too).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import ssl
import time
import urllib.parse
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from gpuws.core.fleet.model import (
    IDENTITY_METRIC,
    IDLE_PEAK,
    KEY_LABELS,
    REMEMBER_S,
    SAMPLE_COUNTS,
    SAMPLE_TIME,
    SNAPSHOT_METRICS,
    THROTTLE,
    THROTTLE_RETIRED,
    XID_COUNT,
    FleetAssembler,
    FleetGpu,
    MissingGpu,
    SeriesKey,
    Vector,
    number_of,
    promql_duration,
    range_step,
    series_key,
    series_values,
    uuid_of,
)
from gpuws.core.fleet.profiles import SECRET_SERVICE, FleetAuth, FleetProfile
from gpuws.core.models import AlertThresholds, SecretKind
from gpuws.core.telemetry.sample import iso8601
from gpuws.remote.budget import DEFAULT_MAX_OUTPUT, OutputBudget, size_text
from gpuws.remote.http import httpx
from gpuws.remote.prometheus_errors import PrometheusAuthFailed as PrometheusAuthFailed
from gpuws.remote.prometheus_errors import PrometheusError as PrometheusError
from gpuws.remote.prometheus_errors import PrometheusTlsUntrusted as PrometheusTlsUntrusted
from gpuws.remote.prometheus_errors import PrometheusUnreachable as PrometheusUnreachable

if TYPE_CHECKING:
    from gpuws.core.fleet.advice import FleetUsageWindow

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 15.0
#: The resolution of "not reporting since T" (a subquery step over the last hour, evaluated only
#: for the exporters of the missing devices: 3,600 points per series, within both stores' limits).
MISSING_STEP_S = 1.0
QUERY_CONCURRENCY = 4
_MAX_ERROR_CHARS = 200


@dataclass(frozen=True)
class _Answer:
    """A Prometheus answer read within the budget."""

    status_code: int
    text: str


#: The tenant header of Grafana Mimir and Cortex (also what their gateways and proxies check).
TENANT_HEADER = "X-Scope-OrgID"
# What a multi-tenant store says when the tenant header is missing (Mimir/Cortex: "no org id").
_NO_TENANT = re.compile(r"no org ?id|tenant|X-Scope-OrgID", re.IGNORECASE)


@dataclass(frozen=True)
class TlsOptions:
    """How a fleet's client checks the server and proves itself (paths, never key material)."""

    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    insecure: bool = False  # no verification at all: said wherever the fleet is shown

    def context(self) -> ssl.SSLContext | bool:
        """httpx's `verify`: an SSL context, or False for insecure."""
        if self.insecure and not self.client_cert:
            return False
        if self.ca_file:
            context = ssl.create_default_context(cafile=self.ca_file)
        else:
            import certifi

            context = ssl.create_default_context(cafile=certifi.where())
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert:
            context.load_cert_chain(self.client_cert, self.client_key)
        return context


def _tls_message(name: str, base_url: str, exc: BaseException, tls: TlsOptions) -> PrometheusError | None:
    """A one-line error for a TLS failure (None: not one); the cause says which option is missing."""
    text = str(exc)
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in text:
        hint = (f"it does not verify against {tls.ca_file}" if tls.ca_file else
                "give its CA with --ca-file (or, knowingly, --insecure)")
        return PrometheusTlsUntrusted(f"{name}: the TLS certificate of {base_url} is not trusted: {hint}")
    upper = str(cause).upper() if cause is not None else text.upper()
    if "CERTIFICATE_REQUIRED" in upper or ("BAD_CERTIFICATE" in upper and not tls.client_cert):
        return PrometheusAuthFailed(f"{name}: {base_url} asks for a client certificate: "
                                    "give --client-cert and --client-key")
    if tls.client_cert and ("BAD_CERTIFICATE" in upper or "UNKNOWN_CA" in upper):
        return PrometheusAuthFailed(f"{name}: {base_url} refused the client certificate {tls.client_cert}")
    if (base_url.startswith("https://") and not tls.client_cert and not text.strip()
            and isinstance(exc, httpx.ReadError | httpx.RemoteProtocolError)):
        # TLS 1.3 sends the server's "certificate required" alert after the handshake: the client
        # sees the connection closed on its first read, with no words.
        return PrometheusAuthFailed(f"{name}: {base_url} closed the TLS connection without an answer: it asks "
                                    "for a client certificate (give --client-cert and --client-key)")
    return None


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."


class PrometheusClient:
    """The three endpoints gpuws uses, on one keep-alive httpx connection pool."""

    def __init__(self, base_url: str, *, name: str = "prometheus", token: str | None = None,
                 basic: tuple[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_S,
                 host_header: str | None = None, transport: httpx.AsyncBaseTransport | None = None,
                 tls: TlsOptions | None = None, tenant: str | None = None,
                 max_output: int = DEFAULT_MAX_OUTPUT) -> None:
        headers = {"Accept": "application/json"}
        self.budget = OutputBudget(max_output)  # the bytes of answers held at once
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if tenant:
            headers[TENANT_HEADER] = tenant
        self.tls = tls or TlsOptions()
        self.tenant = tenant
        if host_header:
            headers["Host"] = host_header  # through an SSH tunnel: the name the server knows itself by
        self.name = name
        self.base_url = base_url.rstrip("/")
        self._sni = host_header.split(":")[0] if host_header else None
        try:
            # Plain http never uses TLS: skip loading the CA bundle (megabytes) for nothing.
            # Redirects are not followed, so an http client never ends up on an https URL.
            verify = self.tls.context() if self.base_url.startswith("https://") else False
        except (OSError, ssl.SSLError) as exc:
            raise PrometheusError(f"{name}: cannot use the TLS files: "
                                  f"{_clip(getattr(exc, 'strerror', None) or str(exc))}") from None
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout,
            auth=httpx.BasicAuth(*basic) if basic else None, transport=transport,
            verify=verify,
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=16),
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def __aenter__(self) -> PrometheusClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _post(self, path: str, data: Sequence[tuple[str, str]]) -> _Answer:
        # POST with a form body: long selectors never hit URL length limits (the API accepts both).
        extensions = {"sni_hostname": self._sni} if self._sni else None
        try:
            async with self._client.stream(
                "POST", path, content=urllib.parse.urlencode(list(data)),
                headers={"Content-Type": "application/x-www-form-urlencoded"}, extensions=extensions,
            ) as response:
                if response.status_code in (401, 403):
                    body = (await self._read_capped(path, response))[:500]
                    if not self.tenant and _NO_TENANT.search(body):
                        raise PrometheusAuthFailed(f"{self.name}: {self.base_url} needs a tenant ({TENANT_HEADER}): "
                                                   f"add the fleet with --tenant ({_clip(body)})")
                    raise PrometheusAuthFailed(
                        f"{self.name}: Prometheus at {self.base_url} refused the credentials "
                        f"(HTTP {response.status_code}); set them with `gpuws fleet add`")
                return _Answer(response.status_code, await self._read_capped(path, response))
        except httpx.TimeoutException:
            raise PrometheusUnreachable(f"{self.name}: Prometheus at {self.base_url} did not answer in time") from None
        except (httpx.HTTPError, ssl.SSLError) as exc:  # a TLS alert read after the handshake is a bare SSLError
            tls_error = _tls_message(self.name, self.base_url, exc, self.tls)
            if tls_error is not None:
                raise tls_error from None
            raise PrometheusUnreachable(f"{self.name}: cannot reach Prometheus at {self.base_url}: "
                                        f"{_clip(str(exc)) or type(exc).__name__}") from None

    async def _read_capped(self, path: str, response: httpx.Response) -> str:
        """The body, its bytes taken from this client's budget as they arrive (the one byte budget
        for remote output, `gpuws.remote.budget`): a flooding server is cut off, not read whole."""
        body = bytearray()
        held = 0
        try:
            async for chunk in response.aiter_bytes():
                if not self.budget.take(len(chunk)):
                    body.clear()
                    raise PrometheusError(f"{self.name}: {self.base_url}{path} answered more than "
                                          f"{size_text(self.budget.limit)}; it was not read")
                held += len(chunk)
                body += chunk
            return body.decode("utf-8", "replace")
        finally:
            self.budget.give(held)

    def _data(self, path: str, response: _Answer) -> Any:
        try:
            body = json.loads(response.text)
        except ValueError:
            raise PrometheusError(f"{self.name}: {self.base_url}{path} answered HTTP {response.status_code} "
                                  "without Prometheus JSON; is this a Prometheus URL?") from None
        except RecursionError:
            raise PrometheusError(f"{self.name}: {self.base_url}{path} answered JSON nested too deeply") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            detail = body.get("error") if isinstance(body, dict) else None
            raise PrometheusError(f"{self.name}: Prometheus refused the query: "
                                  f"{_clip(str(detail or response.status_code))}")
        return body.get("data")

    async def _call(self, path: str, data: Sequence[tuple[str, str]]) -> Any:
        return self._data(path, await self._post(path, data))

    async def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant vector: [{"metric": {labels}, "value": [t, "v"]}, ...]."""
        params = [("query", promql)] + ([("time", f"{at:.3f}")] if at is not None else [])
        data = await self._call("/api/v1/query", params)
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise PrometheusError(f"{self.name}: expected an instant vector for {_clip(promql)}")
        result = data.get("result")
        return result if isinstance(result, list) else []

    async def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range matrix: [{"metric": {labels}, "values": [[t, "v"], ...]}, ...]."""
        data = await self._call("/api/v1/query_range", [("query", promql), ("start", f"{start:.3f}"),
                                                        ("end", f"{end:.3f}"), ("step", f"{step:g}")])
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise PrometheusError(f"{self.name}: expected a range matrix for {_clip(promql)}")
        result = data.get("result")
        return result if isinstance(result, list) else []

    async def query_range_series(self, promql: str, start: float, end: float,
                                 step: float) -> Iterator[dict[str, Any]]:
        """`query_range`'s series, decoded one at a time as the caller takes them.

        A fleet-wide matrix (1,024 series of 120 points) parsed whole is ~20 MB of small Python
        objects (a list, a float and a string per point) alive at once, and the process keeps
        that high-water mark; decoded series by series, only one series' objects exist at a time.
        """
        path = "/api/v1/query_range"
        response = await self._post(path, [("query", promql), ("start", f"{start:.3f}"),
                                           ("end", f"{end:.3f}"), ("step", f"{step:g}")])
        text = response.text if response.status_code == 200 else ""
        series = _matrix_series(text)
        if series is None:  # an error, or not the layout Prometheus writes: the whole-body path says why
            data = self._data(path, response)
            if not isinstance(data, dict) or data.get("resultType") != "matrix":
                raise PrometheusError(f"{self.name}: expected a range matrix for {_clip(promql)}")
            result = data.get("result")
            return iter(result if isinstance(result, list) else [])
        return series

    async def series(self, matchers: Sequence[str], start: float | None = None,
                     end: float | None = None) -> list[dict[str, str]]:
        """The label sets of the series matching any of `matchers`."""
        params = [("match[]", m) for m in matchers]
        if start is not None:
            params.append(("start", f"{start:.3f}"))
        if end is not None:
            params.append(("end", f"{end:.3f}"))
        data = await self._call("/api/v1/series", params)
        return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


_DECODER = json.JSONDecoder()
_MATRIX_HEAD = '"resultType":"matrix","result":['


def _matrix_series(text: str) -> Iterator[dict[str, Any]] | None:
    """The series of a successful range-matrix body, each decoded when it is taken (None: not one).

    Prometheus (and Thanos, Mimir, VictoriaMetrics) write `{"status":"success","data":
    {"resultType":"matrix","result":[{...},...]}...}`. A `"` inside a JSON string is always
    escaped, so the head found here cannot be inside a label value.
    """
    if not text.startswith('{"status":"success"'):
        return None
    head = text.find(_MATRIX_HEAD)
    if head < 0:
        return None

    def each(index: int) -> Iterator[dict[str, Any]]:
        end = len(text)
        while True:
            while index < end and text[index] in " \t\r\n":
                index += 1
            if index >= end or text[index] == "]":
                return
            item, index = _DECODER.raw_decode(text, index)
            if isinstance(item, dict):
                yield item
            while index < end and text[index] in " \t\r\n":
                index += 1
            if index < end and text[index] == ",":
                index += 1

    return each(head + len(_MATRIX_HEAD))


async def all_or_none(*calls: Awaitable[T]) -> list[T]:
    """`asyncio.gather`, but every query ends (each has its own timeout) before the first failure
    is raised: a query left running, or cancelled in its TLS handshake, leaks its connection."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    done: list[T] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        done.append(result)
    return done



def util_query(by: str, whole: str, rng: str) -> str:
    """Per-GPU utilisation (%) averaged over `rng`: DCGM_FI_DEV_GPU_UTIL, or for a whole GPU whose
    exporter has none (a profiling-only counters CSV), DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100."""
    return (f"{by} (avg_over_time(DCGM_FI_DEV_GPU_UTIL{whole}[{rng}])) or "
            f"{by} (100 * avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{whole}[{rng}]))")


def selector(profile_selector: str | None, *extra: str) -> str:
    """`{fleet matchers,extra}` (or empty braces' worth of nothing when there are none)."""
    parts = [p for p in (profile_selector, *extra) if p]
    return "{" + ",".join(parts) + "}" if parts else ""


def instance_matcher(instances: Sequence[str]) -> str | None:
    """`instance=~"a|b"` matching exactly these scrape targets (None for none)."""
    if not instances:
        return None
    pattern = "|".join(re.escape(i) for i in instances).replace("\\", "\\\\")
    return f'instance=~"{pattern}"'


class EmptyReason(StrEnum):
    """Why a snapshot found no GPU at all."""

    NO_SERIES = "no_series"  # nothing matches the selector in the store
    STALE = "stale"  # series exist, but none has a sample within the store's lookback


@dataclass
class Snapshot:
    """Every GPU of a fleet at one instant, and those seen in the last hour that report nothing now."""

    fleet: str
    t: float
    gpus: list[FleetGpu]
    missing: list[MissingGpu] = field(default_factory=list)
    empty: EmptyReason | None = None
    empty_message: str | None = None
    insecure: bool = False  # TLS verification is off for this fleet
    store_t: float | None = None  # the store's newest sample (its own clock; ages count from it)

    @property
    def store_lag_s(self) -> float | None:
        """How far the store's newest sample is behind `t` (VictoriaMetrics: 30 s by default)."""
        return None if self.store_t is None else max(0.0, self.t - self.store_t)

    def to_dict(self) -> dict[str, Any]:
        """`gpuws fleet snapshot --json`."""
        return {"fleet": self.fleet, "t": iso8601(self.t),
                "store_t": None if self.store_t is None else iso8601(self.store_t), "store_lag_s": self.store_lag_s,
                "gpus": [g.to_dict(self.t) for g in self.gpus],
                "not_reporting": [m.to_dict() for m in self.missing],
                "empty": None if self.empty is None else {"reason": self.empty.value, "message": self.empty_message},
                "insecure": self.insecure}


@dataclass
class FleetHistory:
    """A fleet's recent past, downsampled by Prometheus: fleet-wide sums and per-GPU utilisation."""

    start: float
    end: float
    step: float
    times: np.ndarray  # float64 unix seconds, shared by every series
    util_avg_pct: np.ndarray  # float32, NaN where nothing was scraped
    mem_used_mib: np.ndarray
    power_w: np.ndarray
    per_gpu_util: dict[SeriesKey, np.ndarray] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return int(self.times.nbytes + self.util_avg_pct.nbytes + self.mem_used_mib.nbytes + self.power_w.nbytes
                   + sum(a.nbytes for a in self.per_gpu_util.values()))


class FleetSource:
    """Reads one fleet from its Prometheus (client already pointing through any tunnel)."""

    def __init__(self, profile: FleetProfile, client: PrometheusClient,
                 thresholds: AlertThresholds | None = None) -> None:
        self.profile = profile
        self.client = client
        self.thresholds = thresholds or AlertThresholds()

    async def snapshot(self, at: float | None = None) -> Snapshot:
        """One instant query per metric (all at the same evaluation time), joined per device.

        Then the devices seen in the last `REMEMBER_S` that answer nothing now (with their
        exporter's `up` and their newest sample), and, for an empty answer, why it is empty.
        """
        t = time.time() if at is None else at
        sel = selector(self.profile.selector)
        # One metric brings every label (UUID, model, pod...); the others only the device key, so
        # Prometheus sends (and we parse) a fifth of the bytes. `max by` also merges the duplicates
        # a shared GPU has (one series per pod, same value).
        by = f"max by ({','.join(KEY_LABELS)})"
        queries = {metric: f"{metric}{sel}" if metric == IDENTITY_METRIC else f"{by} ({metric}{sel})"
                   for metric in SNAPSHOT_METRICS}
        queries[XID_COUNT] = f"max by ({','.join(KEY_LABELS)},xid) ({XID_COUNT}{sel})"  # one series per XID
        idle_window = promql_duration(self.thresholds.idle_minutes * 60)
        # Whole GPUs without GPU_UTIL (a profiling-only counters CSV): the graphics engine instead.
        whole = selector(self.profile.selector, 'GPU_I_ID=""')
        queries[IDLE_PEAK] = (f"{by} (max_over_time(DCGM_FI_DEV_GPU_UTIL{sel}[{idle_window}])) or "
                              f"{by} (100 * max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{whole}[{idle_window}]))")
        # The age of the instant values: the newest sample's time, and how often it is scraped.
        queries[SAMPLE_TIME] = f"{by} (timestamp({IDENTITY_METRIC}{sel}))"
        for name, window in SAMPLE_COUNTS:
            queries[name] = f"{by} (count_over_time({IDENTITY_METRIC}{sel}[{promql_duration(window)}]))"
        # A few at a time: Prometheus runs them side by side anyway, and the app's memory high-water
        # mark stays at a few parsed answers rather than all of them at once.
        gate = asyncio.Semaphore(QUERY_CONCURRENCY)
        assembler = FleetAssembler()

        async def one(name: str, promql: str) -> None:
            async with gate:
                vector = await self.client.query(promql, t)
            assembler.add(name, vector)  # taken in (and dropped) as soon as it arrives

        remembered: list[Mapping[str, object]] = []

        async def seen() -> None:
            # Every device of the last hour, with what names it (for one that is gone now).
            async with gate:
                remembered.extend(await self.client.query(
                    f"max by ({','.join(KEY_LABELS)},UUID,uuid,modelName,GPU_I_PROFILE) "
                    f"(last_over_time({IDENTITY_METRIC}{sel}[{promql_duration(REMEMBER_S)}]))", t))

        clock: list[float] = []

        async def store_now() -> None:
            """The store's own clock: its newest `up` (every scrape writes one, failed ones too).

            Ages count from it, not from the wall clock: VictoriaMetrics answers 30 s behind by default."""
            async with gate:
                for item in await self.client.query("max(timestamp(up))", t):
                    value = item.get("value")
                    if isinstance(value, list | tuple) and len(value) == 2 and (n := number_of(value[1])) is not None:
                        clock.append(n)

        await all_or_none(*(one(name, q) for name, q in queries.items()), seen(), store_now())
        gpus = assembler.result(t, newest_up=max(clock) if clock else None)
        missing = await self._missing(gpus, remembered, t)
        snap = Snapshot(self.profile.name, t, gpus, missing, insecure=self.profile.insecure,
                        store_t=assembler.store_t)
        if not gpus and not missing:
            snap.empty, snap.empty_message = await self._why_empty(sel, t)
        return snap

    async def _missing(self, gpus: Sequence[FleetGpu], remembered: Vector,
                       t: float) -> list[MissingGpu]:
        """The devices of `remembered` that are not in `gpus`, each with its exporter's `up` and newest
        sample; sets `exporter_up` of the devices in `gpus` on the way (one `up` query for both)."""
        present = {g.key for g in gpus}
        gone: dict[SeriesKey, dict[str, str]] = {}
        for item in remembered:
            labels = item.get("metric") or {}
            key = series_key(labels)
            if key is not None and key not in present:
                gone.setdefault(key, labels)
        up = await self._exporters_up({g.instance for g in gpus if g.instance}
                                      | {labels["instance"] for labels in gone.values() if labels.get("instance")}, t)
        for g in gpus:
            g.exporter_up = up.get(g.instance) if g.instance else None
        if not gone:
            return []
        instances = sorted({labels["instance"] for labels in gone.values() if labels.get("instance")})
        where = instance_matcher(instances)
        newest: dict[SeriesKey, float] = {}
        if where:
            # Newest sample of each gone device: a subquery over the hour, only for their exporters.
            sel = selector(self.profile.selector, where)
            for item in await self.client.query(
                    f"max by ({','.join(KEY_LABELS)}) (max_over_time(timestamp({IDENTITY_METRIC}{sel})"
                    f"[{promql_duration(REMEMBER_S)}:{promql_duration(MISSING_STEP_S)}]))", t):
                key = series_key(item.get("metric") or {})
                value = item.get("value")
                if key is not None and key in gone and isinstance(value, list | tuple) and len(value) == 2:
                    since = number_of(value[1])
                    if since is not None:
                        newest[key] = since
        out = [MissingGpu(host=key.host, gpu=key.gpu, gi=key.gi, uuid=uuid_of(labels),
                          model=labels.get("modelName") or None, instance=labels.get("instance") or None,
                          since=newest.get(key), exporter_up=up.get(labels.get("instance", "")))
               for key, labels in gone.items()]
        return sorted(out, key=lambda m: (m.host, m.gpu, -1 if m.gi is None else m.gi))

    async def _exporters_up(self, instances: set[str], t: float) -> dict[str, bool]:
        """Each exporter's `up` (True: its last scrape worked), by instance."""
        where = instance_matcher(sorted(instances))
        up: dict[str, bool] = {}
        if where:
            for item in await self.client.query(f"max by (instance) (up{{{where}}})", t):
                value = item.get("value")
                instance = (item.get("metric") or {}).get("instance")
                if instance and isinstance(value, list | tuple) and len(value) == 2:
                    up[instance] = value[1] == "1"
        return up

    async def _why_empty(self, sel: str, t: float) -> tuple[EmptyReason, str]:
        """Why no device answered: no series at all, or none with a sample inside the lookback."""
        found = await self.client.series([f"{IDENTITY_METRIC}{sel}"], start=t - REMEMBER_S, end=t)
        what = f"{IDENTITY_METRIC}{sel}"
        if not found:
            return EmptyReason.NO_SERIES, (
                f"{self.profile.name}: no series matched {what} in the last hour: check the selector, and that "
                "the store scrapes dcgm-exporter")
        return EmptyReason.STALE, (
            f"{self.profile.name}: {len(found)} series match {what}, but none has a sample within the "
            f"store's lookback at {iso8601(t)}: the newest data is older than the lookback (exporters down?), "
            "or the store hides recent data (VictoriaMetrics shows nothing newer than -search.latencyOffset, 30 s "
            "by default)")

    async def history(self, window_s: float, points: int = 600, *, end: float | None = None,
                      per_gpu: bool = True) -> FleetHistory:
        """Fleet totals and per-GPU utilisation over `window_s`, averaged per step by Prometheus."""
        stop = time.time() if end is None else end
        step = range_step(window_s, points)
        start = stop - window_s
        rng = promql_duration(step)
        whole = selector(self.profile.selector, 'GPU_I_ID=""')  # MIG instances are inside their GPU
        # Each GPU once in every total: `max by` the device key first (Kubernetes publishes one
        # series per pod sharing a GPU, each with the whole GPU's memory and power).
        by = f"max by ({','.join(KEY_LABELS)})"
        util = util_query(by, whole, rng)
        queries = [
            f"avg({util})",
            f"sum({by} (avg_over_time(DCGM_FI_DEV_FB_USED{whole}[{rng}])))",
            f"sum({by} (avg_over_time(DCGM_FI_DEV_POWER_USAGE{whole}[{rng}])))",
        ]
        # Per GPU: the labels of the device key only (Prometheus sends and we parse a fraction of
        # the bytes); `max by` also merges the duplicates a shared GPU has (one series per pod).
        per_gpu_query = util

        async def per_gpu_series() -> dict[SeriesKey, np.ndarray]:
            out: dict[SeriesKey, np.ndarray] = {}
            if per_gpu:
                for item in await self.client.query_range_series(per_gpu_query, start, stop, step):
                    key = series_key(item.get("metric") or {})
                    if key is not None:
                        out[key] = series_values(item, times)
            return out

        times = np.arange(start, stop + step / 2, step, dtype=np.float64)
        # gather (not all_or_none) here: its tasks exist at once, so a history cancelled before it
        # starts leaves no query coroutine never awaited.
        results, per = await asyncio.gather(
            asyncio.gather(*(self.client.query_range(q, start, stop, step) for q in queries)), per_gpu_series())
        totals = [series_values(r[0] if r else None, times) for r in results]
        return FleetHistory(start, stop, step, times, totals[0], totals[1], totals[2], per)

    async def usage_window(self, window_s: float, *, end: float | None = None,
                           points: int | None = None) -> FleetUsageWindow:
        """Each device's use over the last `window_s` for right-size advice, downsampled by Prometheus.

        A cheap fleet-wide count first finds where the data starts (a 24 h window over a
        Prometheus that holds an hour is asked for that hour, at a finer step); then five range
        queries for the whole fleet (utilisation, MIG engine activity, peak memory with every
        label, memory total, throttle mask), each step averaging at least `MIN_RANGE_S`.
        """
        from gpuws.core.fleet import advice as fa

        stop = time.time() if end is None else end
        sel = self.profile.selector
        every, whole, mig = selector(sel), selector(sel, 'GPU_I_ID=""'), selector(sel, 'GPU_I_ID!=""')
        coarse = range_step(window_s, 120)
        # Grids end exactly at `stop` (Prometheus evaluates start + k x step): the newest data is
        # never between the last evaluation and now.
        probe_start = stop - coarse * math.ceil(window_s / coarse)
        probe = await self.client.query_range(
            f"count(count_over_time(DCGM_FI_DEV_FB_USED{every}[{promql_duration(coarse)}]))", probe_start, stop, coarse)
        seen = [float(t) for row in probe for t, v in row.get("values") or [] if v not in ("0", "NaN")]
        if not seen:
            return fa.FleetUsageWindow.empty(stop - window_s, stop)
        first = max(stop - window_s, min(seen) - coarse)
        step = range_step(max(stop - first, 1.0), points or fa.ADVICE_POINTS)
        start = stop - step * math.ceil((stop - first) / step)
        rng = promql_duration(max(step, fa.MIN_RANGE_S))
        by = f"max by ({','.join(KEY_LABELS)})"
        queries = {
            fa.UTIL: util_query(by, whole, rng),
            fa.ENGINE: f"{by} (avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{mig}[{rng}]))",
            fa.MEM: f"max_over_time(DCGM_FI_DEV_FB_USED{every}[{rng}])",  # every label: the identity
            fa.MEM_TOTAL: f"{by} (last_over_time(DCGM_FI_DEV_FB_USED{every}[{rng}])"
                          f" + last_over_time(DCGM_FI_DEV_FB_FREE{every}[{rng}]))",
            # The current name, else the retired one (`or` keeps a device's first answer).
            fa.THROTTLE: f"{by} (last_over_time({THROTTLE}{whole}[{rng}])) or "
                         f"{by} (last_over_time({THROTTLE_RETIRED}{whole}[{rng}]))",
        }
        gate = asyncio.Semaphore(QUERY_CONCURRENCY)

        async def one(promql: str) -> list[dict[str, Any]]:
            async with gate:
                return await self.client.query_range(promql, start, stop, step)

        answers = await all_or_none(*(one(q) for q in queries.values()))
        return fa.window_from_answers(start, stop, step, dict(zip(queries, answers, strict=True)))

    async def series_count(self) -> int:
        """How many dcgm-exporter GPU series the fleet has now (a cheap check that it is there)."""
        found = await self.client.series([f"DCGM_FI_DEV_FB_USED{selector(self.profile.selector)}"],
                                         start=time.time() - 300)
        return len(found)


# --- opening a fleet (credentials, tunnel) ----------------------------------------------------


def fleet_credentials(profile: FleetProfile, secrets: Any) -> dict[str, Any]:
    if profile.auth is FleetAuth.NONE:
        return {}
    if secrets is None:
        from gpuws.core.secrets import SecretStore

        secrets = SecretStore(service=SECRET_SERVICE)
    if profile.auth is FleetAuth.BEARER:
        token = secrets.get(profile.name, SecretKind.TOKEN)
        if not token:
            raise PrometheusAuthFailed(f"{profile.name}: no bearer token in the keyring; "
                                       "add the fleet again with --token-stdin")
        return {"token": token}
    password = secrets.get(profile.name, SecretKind.PASSWORD)
    if password is None or profile.user is None:
        raise PrometheusAuthFailed(f"{profile.name}: no basic-auth password in the keyring; "
                                   "add the fleet again with --password-stdin")
    return {"basic": (profile.user, password)}
