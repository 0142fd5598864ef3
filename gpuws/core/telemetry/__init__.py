"""Live GPU telemetry: the sample model, throttle reasons, tiered history, alerts, CSV export."""
