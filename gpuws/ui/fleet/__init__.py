"""The fleet view: every GPU of a Prometheus-backed fleet, most urgent first (see `view`)."""
