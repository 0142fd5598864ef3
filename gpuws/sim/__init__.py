"""The simulated GPU host: an emulator of nvidia-smi and NVML, and the demo SSH server.

Everything it produces is labelled a simulation (see `gpuws.core.simulation`).
"""
