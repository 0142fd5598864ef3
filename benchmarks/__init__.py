"""Performance benchmarks: `python -m benchmarks` runs them all and prints figures."""
