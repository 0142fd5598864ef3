"""Telemetry dashboards: GPU cards, detail plots, the all-hosts overview, alerts and export."""
