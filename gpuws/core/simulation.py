"""How the simulated GPU host announces itself, so a simulation is never mistaken for a real card.

The emulator's `nvidia-smi -q -x` carries `SIM_XML_MARKER` as an XML comment (a real driver never
writes one), its host sets `SIM_ENV_VAR`, and the fake NVML module has `GPUWS_SIMULATED = True`.
"""

SIM_XML_MARKER = "gpuws-simulated-gpu-host"
SIM_ENV_VAR = "GPUWS_SIMULATED"
SIM_STATE_ENV_VAR = "GPUWS_SIM_STATE"
SIM_LABEL = "SIMULATED"
# The name every command takes for the built-in simulated host; no stored profile may take it.
DEMO_ALIAS = "demo"
