"""gpuws: a desktop workstation manager for cloud GPU sessions."""

__version__ = "0.1.0"
