"""`python -m gpuws` is the same as the `gpuws` command."""

from gpuws.cli.main import main

raise SystemExit(main())
