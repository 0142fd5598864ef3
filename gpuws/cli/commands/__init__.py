"""Subcommands of `gpuws`, one module each (see gpuws.cli.main.COMMAND_MODULES)."""
