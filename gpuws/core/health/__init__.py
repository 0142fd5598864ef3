"""`gpuws health`: passive health checks of a GPU host (facts, checks, the on-host script)."""

from gpuws.core.health.checks import Finding, GpuHealth, HealthVerdict, HostHealth
from gpuws.core.health.collect import evaluate, provider_report, script_argv

__all__ = ["Finding", "GpuHealth", "HealthVerdict", "HostHealth", "evaluate", "provider_report", "script_argv"]
