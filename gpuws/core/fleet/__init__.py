"""Fleets: many GPUs read from a Prometheus that scrapes NVIDIA's dcgm-exporter (Qt-free, network-free).

`profiles` stores fleet profiles (`fleets.toml`); `model` turns per-metric Prometheus results into
one record per GPU or MIG instance, ranks them by what needs attention and sums the fleet up.
The HTTP side lives in `gpuws.remote.prometheus`.
"""
