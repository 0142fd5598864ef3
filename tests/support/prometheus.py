"""Real time-series stores on loopback ports, scraping simulated dcgm-exporters: Prometheus
(Debian's `prometheus`, optionally behind TLS with a client certificate) and VictoriaMetrics
(Debian's `victoria-metrics`, single node, scraping with its own `-promscrape.config`).

Writes a prometheus.yml with a 1 s scrape interval, starts the server with its own data dir,
waits until every target is up and has been scraped, and stops it on exit.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.processes import end
from tests.support.sshd import free_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
VICTORIA_METRICS = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"
#: VictoriaMetrics hides the newest 30 s by default (-search.latencyOffset); the tests that compare
#: it with Prometheus use 1 s, one test keeps the default to see gpuws say why nothing shows.
VM_LATENCY_OFFSET = "1s"


def prometheus_yml(targets: Sequence[str], interval_s: int = 1) -> str:
    """The scrape config a user would write for dcgm-exporters (README shows the same)."""
    listed = ", ".join(f'"{t}"' for t in targets)
    return (
        "global:\n"
        f"  scrape_interval: {interval_s}s\n"
        f"  evaluation_interval: {interval_s}s\n"
        "scrape_configs:\n"
        "  - job_name: dcgm-exporter\n"
        f"    static_configs:\n      - targets: [{listed}]\n"
    )


@dataclass
class PrometheusServer:
    """One running Prometheus (or VictoriaMetrics: `kind`), reachable at `url`."""

    url: str
    process: subprocess.Popen[bytes]
    workdir: Path
    kind: str = "prometheus"
    ssl_context: ssl.SSLContext | None = None  # for a TLS-fronted server: the test client's context

    def stop(self) -> None:
        end(self.process, grace_s=20)

    def get(self, path: str) -> object:
        with urllib.request.urlopen(self.url + path, timeout=10, context=self.ssl_context) as response:
            return json.loads(response.read())

    def targets_up(self) -> int:
        """How many scrape targets are up (each store has its own targets page)."""
        if self.kind == "victoria-metrics":
            data: Any = self.get("/api/v1/query?query=sum(up)")
            result = data["data"]["result"]
            return int(float(result[0]["value"][1])) if result else 0
        active: Any = self.get("/api/v1/targets?state=active")
        return len([t for t in active["data"]["activeTargets"] if t["health"] == "up"])

    def wait_scraped(self, targets: int, series_min: int = 1, timeout: float = 90.0) -> None:
        """Until all `targets` are up and GPU series are queryable."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited: see {self.workdir / (self.kind + '.log')}")
            try:
                up = self.targets_up()
                count = self.get("/api/v1/query?query=count(DCGM_FI_DEV_FB_USED)")
                result = count["data"]["result"]  # type: ignore[index]
                n = int(float(result[0]["value"][1])) if result else 0
                if up >= targets and n >= series_min:
                    return
            except (OSError, KeyError, ValueError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{self.kind} did not scrape {targets} targets in {timeout:.0f} s")

    def wait_samples(self, selector: str, samples: int, timeout: float = 120.0) -> None:
        """Until Prometheus holds `samples` scrapes of the series `selector` picks (advice needs a
        span of data, not an instant)."""
        query = urllib.parse.quote(f"max(count_over_time(DCGM_FI_DEV_FB_USED{{{selector}}}[30m]))")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.get(f"/api/v1/query?query={query}")["data"]["result"]  # type: ignore[index]
            if result and float(result[0]["value"][1]) >= samples:
                return
            time.sleep(1.0)
        raise TimeoutError(f"prometheus did not hold {samples} samples of {selector} in {timeout:.0f} s")


def start_prometheus(workdir: Path, targets: Sequence[str], interval_s: int = 1,
                     retention: str = "2h", tls: Any = None) -> PrometheusServer:
    """Start Prometheus scraping `targets`; the caller stops it.

    With `tls` (a `tests.support.tls.TestPki`) it serves https only, with its `web.config.file`
    requiring a client certificate signed by the test CA.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(prometheus_yml(targets, interval_s))
    port = free_port()
    extra: list[str] = []
    context = None
    if tls is not None:
        web = workdir / "web.yml"
        web.write_text("tls_server_config:\n"
                       f"  cert_file: {tls.server_cert}\n  key_file: {tls.server_key}\n"
                       f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {tls.ca_cert}\n")
        extra.append(f"--web.config.file={web}")
        context = ssl.create_default_context(cafile=str(tls.ca_cert))
        context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", f"--storage.tsdb.retention.time={retention}",
         "--log.level=warn", *extra],
        stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
    )
    log.close()
    scheme = "https" if tls is not None else "http"
    return PrometheusServer(f"{scheme}://127.0.0.1:{port}", process, workdir, ssl_context=context)


def start_victoria_metrics(workdir: Path, targets: Sequence[str], interval_s: int = 1,
                           latency_offset: str = VM_LATENCY_OFFSET) -> PrometheusServer:
    """Start single-node VictoriaMetrics scraping `targets` (same scrape config); the caller stops it."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(prometheus_yml(targets, interval_s))
    port = free_port()
    log = (workdir / "victoria-metrics.log").open("wb")
    process = subprocess.Popen(
        [VICTORIA_METRICS, f"-promscrape.config={config}", f"-storageDataPath={workdir / 'data'}",
         f"-httpListenAddr=127.0.0.1:{port}", "-retentionPeriod=1d", f"-search.latencyOffset={latency_offset}",
         "-search.disableCache", "-promscrape.config.strictParse=false", "-loggerLevel=WARN"],
        stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
    )
    log.close()
    return PrometheusServer(f"http://127.0.0.1:{port}", process, workdir, kind="victoria-metrics")


def start_store(kind: str, workdir: Path, targets: Sequence[str]) -> PrometheusServer:
    """A store of `kind` ("prometheus" or "victoria-metrics") scraping `targets` every second."""
    if kind == "victoria-metrics":
        return start_victoria_metrics(workdir, targets)
    return start_prometheus(workdir, targets)
