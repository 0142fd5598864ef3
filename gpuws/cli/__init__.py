"""The command line: `gpuws` (GUI when bare) and its subcommands, scripting the same core."""
