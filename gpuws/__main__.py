"""`python -m gpuws` is the same as the `gpuws` command."""

from gpuws.cli.entry import run

run()
