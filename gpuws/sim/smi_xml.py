"""`nvidia-smi -q -x` of the simulated host: the DTD v13 layout of real 590-series drivers.

Element names and order follow fixtures/nvidia-smi-xml/3090-v13.xml (and a100-sxm4-v12.xml for
MIG devices). Right after the XML declaration comes a comment carrying
`gpuws.core.simulation.SIM_XML_MARKER`, which a real driver never writes.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from gpuws.core.simulation import SIM_XML_MARKER
from gpuws.sim import health
from gpuws.sim.dynamics import (
    REASON_APPLICATIONS_CLOCKS_SETTING,
    REASON_DISPLAY_CLOCK_SETTING,
    REASON_GPU_IDLE,
    REASON_HW_POWER_BRAKE_SLOWDOWN,
    REASON_HW_SLOWDOWN,
    REASON_HW_THERMAL_SLOWDOWN,
    REASON_SW_POWER_CAP,
    REASON_SW_THERMAL_SLOWDOWN,
    REASON_SYNC_BOOST,
    GpuSample,
    sample,
)
from gpuws.sim.mig import mig_devices
from gpuws.sim.smi_fields import ctime_like
from gpuws.sim.state import GpuState, SimState

NA = "N/A"


class _Doc:
    """Writes nested elements with real nvidia-smi's tab indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def leaf(self, tag: str, value: object) -> None:
        self.lines.append("\t" * self.depth + f"<{tag}>{escape(str(value))}</{tag}>")

    def open(self, tag: str, attrs: str = "") -> None:
        self.lines.append("\t" * self.depth + f"<{tag}{attrs}>")
        self.depth += 1

    def close(self, tag: str) -> None:
        self.depth -= 1
        self.lines.append("\t" * self.depth + f"</{tag}>")

    def group(self, tag: str, items: list[tuple[str, object]]) -> None:
        self.open(tag)
        for name, value in items:
            self.leaf(name, value)
        self.close(tag)


def _active(s: GpuSample, bit: int) -> str:
    return "Active" if s.reasons & bit else "Not Active"


def _mig_section(d: _Doc, gpu: GpuState) -> None:
    model = gpu.model
    if not model.mig_capable:
        d.group("mig_mode", [("current_mig", NA), ("pending_mig", NA)])
    else:
        d.group("mig_mode", [
            ("current_mig", "Enabled" if gpu.mig_current else "Disabled"),
            ("pending_mig", "Enabled" if gpu.mig_pending else "Disabled"),
        ])
    devices = mig_devices(gpu) if gpu.mig_current else []
    if not devices:
        d.open("mig_devices")
        d.lines.append("\t" * d.depth + "None")
        d.close("mig_devices")
        return
    d.open("mig_devices")
    for index, (gi, ci) in enumerate(devices):
        profile = model.mig_profile(gi.profile_id)
        assert profile is not None
        used = sum(p.used_mib for p in gpu.processes if p.gpu_instance_id == gi.gi_id)
        d.open("mig_device")
        d.leaf("index", index)
        d.leaf("gpu_instance_id", gi.gi_id)
        d.leaf("compute_instance_id", ci.ci_id)
        d.open("device_attributes")
        d.group("shared", [
            ("multiprocessor_count", (profile.sm_count or 0) * ci.slices // profile.compute_slices),
            ("copy_engine_count", profile.copy_engines),
            ("encoder_count", profile.encoders),
            ("decoder_count", profile.decoders),
            ("ofa_count", profile.ofa),
            ("jpg_count", profile.jpeg),
        ])
        d.close("device_attributes")
        d.open("ecc_error_count")
        d.group("volatile_count", [("sram_uncorrectable", 0)])
        d.close("ecc_error_count")
        d.group("fb_memory_usage", [
            ("total", f"{profile.memory_mib} MiB"), ("reserved", "0 MiB"),
            ("used", f"{used} MiB"), ("free", f"{profile.memory_mib - used} MiB"),
        ])
        d.group("bar1_memory_usage", [
            ("total", f"{profile.bar1_mib} MiB"), ("used", "0 MiB"), ("free", f"{profile.bar1_mib} MiB"),
        ])
        d.close("mig_device")
    d.close("mig_devices")


def _gpu(d: _Doc, state: SimState, gpu: GpuState, now: float) -> None:
    model = gpu.model
    s = sample(gpu, now)
    vgpu = model.virtualization_mode == "VGPU"
    datacenter = model.mig_capable
    domain, bus, dev = gpu.pci_bus_id.split(":")
    d.open("gpu", f' id="{gpu.pci_bus_id}"')
    d.leaf("product_name", model.name)
    d.leaf("product_brand", model.brand)
    d.leaf("product_architecture", model.architecture)
    d.leaf("display_mode", "Requested functionality has been deprecated")
    d.leaf("display_attached", "No")
    d.leaf("display_active", "Disabled")
    d.leaf("persistence_mode", "Enabled")
    d.leaf("addressing_mode", "HMM" if not vgpu else "None")
    _mig_section(d, gpu)
    d.leaf("accounting_mode", "Disabled")
    d.leaf("accounting_mode_buffer_size", 4000)
    d.group("driver_model", [("current_dm", NA), ("pending_dm", NA)])
    d.leaf("serial", gpu.serial)
    d.leaf("uuid", gpu.uuid)
    d.leaf("minor_number", gpu.index)
    d.leaf("vbios_version", model.vbios_version)
    d.leaf("multigpu_board", "No")
    d.leaf("board_id", f"0x{int(bus, 16) << 8:x}")
    d.leaf("gpu_part_number", NA)
    d.group("inforom_version", [
        ("img_version", "G520.0200.00.05" if datacenter else NA), ("oem_object", "2.1"),
        ("ecc_object", "7.16" if model.ecc else NA), ("pwr_object", NA),
    ])
    d.group("gpu_operation_mode", [("current_gom", NA), ("pending_gom", NA)])
    d.leaf("c2c_mode", "Disabled" if datacenter else NA)
    d.group("gpu_virtualization_mode", [
        ("virtualization_mode", model.virtualization_mode),
        ("host_vgpu_mode", NA),
        ("vgpu_heterogeneous_mode", NA),
    ])
    if vgpu:
        # What a licensed vGPU guest reports about its license.
        d.group("vgpu_software_licensed_product", [
            ("licensed_product_name", model.vgpu_license),
            ("license_status", "Licensed (Expiry: N/A)"),
        ])
    d.leaf("gpu_recovery_action", health.recovery_action(gpu))
    d.leaf("gsp_firmware_version", state.driver_version if not vgpu else NA)
    d.group("ibmnpu", [("relaxed_ordering_mode", NA)])
    d.open("pci")
    d.leaf("pci_bus", bus)
    d.leaf("pci_device", dev.split(".")[0])
    d.leaf("pci_domain", domain[-4:])
    d.leaf("pci_base_class", 3)
    d.leaf("pci_sub_class", 2 if datacenter else 0)
    d.leaf("pci_device_id", model.pci_device_id)
    d.leaf("pci_bus_id", gpu.pci_bus_id)
    d.leaf("pci_sub_system_id", model.pci_sub_system_id)
    d.open("pci_gpu_link_info")
    gen_now, gen_slot = health.pcie_gen_current(gpu, s.pcie_gen_current), health.pcie_gen_max_system(gpu)
    d.group("pcie_gen", [
        ("max_link_gen", gen_slot), ("current_link_gen", gen_now),
        ("device_current_link_gen", gen_now), ("max_device_link_gen", model.pcie_gen_max),
        ("max_host_link_gen", gen_slot),
    ])
    d.group("link_widths", [
        ("max_link_width", f"{model.pcie_width_max}x"), ("current_link_width", f"{health.pcie_width_current(gpu)}x"),
    ])
    d.close("pci_gpu_link_info")
    d.group("pci_bridge_chip", [("bridge_chip_type", NA), ("bridge_chip_fw", NA)])
    d.leaf("replay_counter", 0)
    d.leaf("replay_rollover_counter", 0)
    d.leaf("tx_util", f"{s.pcie_tx_kbs} KB/s")
    d.leaf("rx_util", f"{s.pcie_rx_kbs} KB/s")
    d.leaf("atomic_caps_outbound", NA)
    d.leaf("atomic_caps_inbound", NA)
    d.close("pci")
    d.leaf("fan_speed", f"{int(30 + 50 * s.load)} %" if model.has_fan else NA)
    d.leaf("performance_state", s.pstate)
    d.group("clocks_event_reasons", [
        ("clocks_event_reason_gpu_idle", _active(s, REASON_GPU_IDLE)),
        ("clocks_event_reason_applications_clocks_setting", _active(s, REASON_APPLICATIONS_CLOCKS_SETTING)),
        ("clocks_event_reason_sw_power_cap", _active(s, REASON_SW_POWER_CAP)),
        ("clocks_event_reason_hw_slowdown", _active(s, REASON_HW_SLOWDOWN)),
        ("clocks_event_reason_hw_thermal_slowdown", _active(s, REASON_HW_THERMAL_SLOWDOWN)),
        ("clocks_event_reason_hw_power_brake_slowdown", _active(s, REASON_HW_POWER_BRAKE_SLOWDOWN)),
        ("clocks_event_reason_sync_boost", _active(s, REASON_SYNC_BOOST)),
        ("clocks_event_reason_sw_thermal_slowdown", _active(s, REASON_SW_THERMAL_SLOWDOWN)),
        ("clocks_event_reason_display_clocks_setting", _active(s, REASON_DISPLAY_CLOCK_SETTING)),
    ])
    d.group("clocks_event_reasons_counters", [
        ("clocks_event_reasons_counters_sw_power_cap", "0 us"),
        ("clocks_event_reasons_counters_sync_boost", "0 us"),
        ("clocks_event_reasons_counters_sw_therm_slowdown", "0 us"),
        ("clocks_event_reasons_counters_hw_therm_slowdown", "0 us"),
        ("clocks_event_reasons_counters_hw_power_brake", "0 us"),
    ])
    d.leaf("sparse_operation_mode", NA)
    d.group("fb_memory_usage", [
        ("total", f"{s.mem_total_mib} MiB"), ("reserved", f"{s.mem_reserved_mib} MiB"),
        ("used", f"{s.mem_used_mib} MiB"), ("free", f"{s.mem_free_mib} MiB"),
    ])
    d.group("bar1_memory_usage", [
        ("total", f"{model.bar1_total_mib} MiB"), ("used", "1 MiB"), ("free", f"{model.bar1_total_mib - 1} MiB"),
    ])
    d.group("cc_protected_memory_usage", [("total", "0 MiB"), ("used", "0 MiB"), ("free", "0 MiB")])
    d.leaf("compute_mode", "Default")
    d.group("utilization", [
        ("gpu_util", NA if s.util_gpu_pct is None else f"{s.util_gpu_pct} %"),
        ("memory_util", NA if s.util_mem_pct is None else f"{s.util_mem_pct} %"),
        ("encoder_util", f"{s.encoder_pct} %"),
        ("decoder_util", f"{s.decoder_pct} %"),
        ("jpeg_util", "0 %"),
        ("ofa_util", "0 %"),
    ])
    d.group("encoder_stats", [("session_count", 0), ("average_fps", 0), ("average_latency", 0)])
    d.group("fbc_stats", [("session_count", 0), ("average_fps", 0), ("average_latency", 0)])
    d.group("dram_encryption_mode", [("current_dram_encryption", NA), ("pending_dram_encryption", NA)])
    ecc = "Enabled" if model.ecc else NA
    d.group("ecc_mode", [("current_ecc", ecc), ("pending_ecc", ecc)])
    zero = 0 if model.ecc else NA
    d.open("ecc_errors")
    d.group("volatile", [
        ("sram_correctable", zero), ("sram_uncorrectable_parity", zero), ("sram_uncorrectable_secded", zero),
        ("dram_correctable", zero), ("dram_uncorrectable", zero),
    ])
    d.group("aggregate", [
        ("sram_correctable", zero), ("sram_uncorrectable_parity", zero), ("sram_uncorrectable_secded", zero),
        ("dram_correctable", zero), ("dram_uncorrectable", zero),
        ("sram_threshold_exceeded", "No" if model.ecc else NA),
    ])
    d.close("ecc_errors")
    d.open("retired_pages")
    d.group("multiple_single_bit_retirement", [("retired_count", NA), ("retired_pagelist", NA)])
    d.group("double_bit_retirement", [("retired_count", NA), ("retired_pagelist", NA)])
    d.leaf("pending_blacklist", NA)
    d.leaf("pending_retirement", NA)
    d.close("retired_pages")
    if datacenter:
        d.group("remapped_rows", [
            ("remapped_row_corr", 0), ("remapped_row_unc", 0),
            ("remapped_row_pending", "Yes" if health.remap_pending(gpu) else "No"), ("remapped_row_failure", "No"),
        ])
    else:
        d.leaf("remapped_rows", NA)
    d.group("temperature", [
        ("gpu_temp", f"{s.temp_c} C"),
        ("gpu_temp_tlimit", f"{model.max_operating_temp_c - s.temp_c} C" if datacenter else NA),
        ("gpu_temp_max_threshold", f"{model.shutdown_temp_c} C"),
        ("gpu_temp_slow_threshold", f"{model.slowdown_temp_c} C"),
        ("gpu_temp_max_gpu_threshold", f"{model.max_operating_temp_c} C"),
        ("gpu_target_temperature", NA),
        ("memory_temp", f"{s.mem_temp_c} C" if datacenter else NA),
        ("gpu_temp_max_mem_threshold", "95 C" if datacenter else NA),
    ])
    d.group("supported_gpu_target_temp", [("gpu_target_temp_min", NA), ("gpu_target_temp_max", NA)])

    def watts(value: float) -> str:
        return NA if vgpu else f"{value:.2f} W"

    d.group("gpu_power_readings", [
        ("power_state", "Requested functionality has been deprecated"),
        ("average_power_draw", watts(s.power_w)),
        ("instant_power_draw", watts(s.power_w)),
        ("current_power_limit", watts(health.power_limit_w(gpu))),
        ("requested_power_limit", watts(health.power_limit_w(gpu))),
        ("default_power_limit", watts(model.power_limit_w)),
        ("min_power_limit", watts(model.power_min_w)),
        ("max_power_limit", watts(model.power_limit_w)),
    ])
    d.group("gpu_memory_power_readings", [("average_power_draw", NA), ("instant_power_draw", NA)])
    d.leaf("power_smoothing", NA)
    d.group("clocks", [
        ("graphics_clock", f"{s.sm_clock_mhz} MHz"), ("sm_clock", f"{s.sm_clock_mhz} MHz"),
        ("mem_clock", f"{s.mem_clock_mhz} MHz"), ("video_clock", f"{s.video_clock_mhz} MHz"),
    ])
    deprecated = "Requested functionality has been deprecated"
    d.group("applications_clocks", [("graphics_clock", deprecated), ("mem_clock", deprecated)])
    d.group("default_applications_clocks", [("graphics_clock", deprecated), ("mem_clock", deprecated)])
    d.group("deferred_clocks", [("mem_clock", NA)])
    d.group("max_clocks", [
        ("graphics_clock", f"{model.max_sm_clock_mhz} MHz"), ("sm_clock", f"{model.max_sm_clock_mhz} MHz"),
        ("mem_clock", f"{model.max_mem_clock_mhz} MHz"), ("video_clock", f"{model.max_video_clock_mhz} MHz"),
    ])
    d.group("max_customer_boost_clocks", [("graphics_clock", f"{model.max_sm_clock_mhz} MHz")])
    d.group("clock_policy", [("auto_boost", NA), ("auto_boost_default", NA)])
    d.open("supported_clocks")
    d.open("supported_mem_clock")
    d.leaf("value", f"{model.max_mem_clock_mhz} MHz")
    for clock in range(model.max_sm_clock_mhz, model.idle_sm_clock_mhz - 1, -495):
        d.leaf("supported_graphics_clock", f"{clock} MHz")
    d.close("supported_mem_clock")
    d.close("supported_clocks")
    d.open("processes")
    for proc in s.processes:
        d.group("process_info", [
            ("gpu_instance_id", NA if proc.gpu_instance_id is None else proc.gpu_instance_id),
            ("compute_instance_id", NA if proc.compute_instance_id is None else proc.compute_instance_id),
            ("pid", proc.pid),
            ("type", "C"),
            ("process_name", proc.name),
            ("used_memory", f"{proc.used_mib} MiB"),
        ])
    d.close("processes")
    d.open("accounted_processes")
    d.close("accounted_processes")
    state_, status = health.fabric(gpu)
    d.group("fabric", [("state", state_), ("status", status), ("cliqueId", NA if state_ == NA else 0),
                       ("clusterUuid", NA if state_ == NA else "00000000-0000-0000-0000-000000000000")])
    d.group("capabilities", [("egm", "disabled")])
    d.close("gpu")


def render_xml(state: SimState, gpus: list[GpuState], now: float) -> str:
    """The whole `nvidia-smi -q -x` document for `gpus`."""
    d = _Doc()
    d.lines += [
        '<?xml version="1.0" ?>',
        f"<!-- {SIM_XML_MARKER}: simulated GPU host, not real hardware -->",
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">',
    ]
    d.open("nvidia_smi_log")
    d.leaf("timestamp", ctime_like(now))
    d.leaf("driver_version", state.driver_version)
    d.leaf("cuda_version", state.cuda_version)
    d.leaf("attached_gpus", len(gpus))
    for gpu in gpus:
        _gpu(d, state, gpu, now)
        d.lines.append("")
    d.close("nvidia_smi_log")
    return "\n".join(d.lines) + "\n"
