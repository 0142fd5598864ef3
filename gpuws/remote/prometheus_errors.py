"""The errors of reading a Prometheus, apart from its client (numpy, httpx), so the exit-status
table (`gpuws.app.errors`) can name them without loading either into every command."""

from __future__ import annotations

from gpuws.core.errors import GpuwsError


class PrometheusError(GpuwsError):
    """Prometheus answered with an error (bad query, overload); the message is its own, as text."""


class PrometheusUnreachable(PrometheusError):
    """No answer from Prometheus (refused, timed out, DNS)."""


class PrometheusAuthFailed(PrometheusError):
    """Prometheus (or its proxy) refused our credentials (HTTP 401/403, or a client certificate)."""


class PrometheusTlsUntrusted(PrometheusUnreachable):
    """The server's certificate does not verify against the CA bundle or the fleet's CA file."""
