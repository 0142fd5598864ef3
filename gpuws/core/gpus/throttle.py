"""NVML clock event ("throttle") reason bits (`nvmlClocksEventReason*`, formerly
`nvmlClocksThrottleReason*` in nvml.h), the one table the core and the simulator use.

The agent scripts keep a standalone copy (they run on the host with the stdlib only); a test
reads both and fails when they drift.
"""

from __future__ import annotations

GPU_IDLE = 0x1
APPLICATIONS_CLOCKS_SETTING = 0x2
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SYNC_BOOST = 0x10
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
DISPLAY_CLOCK_SETTING = 0x100
BOARD_LIMIT = 0x200  # nvmlClocksThrottleReasonBoardLimit (older drivers)
RELIABILITY = 0x400  # nvmlClocksThrottleReasonReliability (older drivers)

CLOCK_EVENT_BITS: tuple[tuple[int, str], ...] = (
    (GPU_IDLE, "gpu_idle"),
    (APPLICATIONS_CLOCKS_SETTING, "applications_clocks_setting"),
    (SW_POWER_CAP, "sw_power_cap"),
    (HW_SLOWDOWN, "hw_slowdown"),
    (SYNC_BOOST, "sync_boost"),
    (SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
    (HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
    (HW_POWER_BRAKE_SLOWDOWN, "hw_power_brake_slowdown"),
    (DISPLAY_CLOCK_SETTING, "display_clock_setting"),
    (BOARD_LIMIT, "board_limit"),
    (RELIABILITY, "reliability"),
)
