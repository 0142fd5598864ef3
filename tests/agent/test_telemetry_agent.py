"""The telemetry agent's protocol 2, run for real against the simulated host's fake NVML, and its decoder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuws.core.errors import ParseError
from gpuws.core.telemetry.agent_wire import AgentDecoder, decode_lines
from gpuws.core.telemetry.store import METRIC_INDEX

REPO = Path(__file__).resolve().parents[2]
AGENT = REPO / "gpuws" / "agent" / "telemetry_agent.py"
FAKE_NVML = REPO / "gpuws" / "sim" / "fake_nvml"


def run_agent(tmp_path: Path, *args: str) -> list[str]:
    """The agent's output lines, run as on a host: `python3 -` with the script on stdin."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    env = {"PYTHONPATH": f"{FAKE_NVML}:{REPO}", "GPUWS_SIM_STATE": str(state), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-", *args], input=AGENT.read_text(), capture_output=True, text=True, env=env,
        timeout=60, check=True,
    )
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return run_agent(tmp_path_factory.mktemp("agent"), "--hz", "20", "--count", "30")


def test_static_facts_once_then_only_changed_values(lines: list[str]) -> None:
    hello = json.loads(lines[0])
    assert hello["type"] == "hello" and hello["protocol"] == 2 and hello["simulated"] is True
    assert hello["gpu_count"] == 4 and "power_w" in hello["fields"] and "uuid" not in hello["fields"]
    devices = [json.loads(line) for line in lines if '"type":"devices"' in line]
    assert len(devices) == 1  # nothing static changed in 1.5 s
    facts = devices[0]["devices"]
    assert [d["uuid"][:4] for d in facts] == ["GPU-"] * 4 and facts[0]["sm_clock_max_mhz"] == 1980
    samples = [json.loads(line) for line in lines if line.startswith("[")]
    assert len(samples) == 30
    first_fields = {f for change in samples[0][1:] for f in change[2::2]}
    assert len(first_fields) >= 15  # the first sample carries every known value
    # Later samples carry only what changed: never a UUID, and far fewer values than the first.
    later = sum(len(change) - 1 for s in samples[1:] for change in s[1:]) / 2 / (len(samples) - 1)
    assert later < len(hello["fields"]) * 4 / 2
    assert all("GPU-" not in line for line in lines if line.startswith("["))


def test_processes_are_sent_when_they_change_with_user_command_and_sm_util(lines: list[str]) -> None:
    procs = [json.loads(line) for line in lines if '"type":"procs"' in line]
    assert 1 <= len(procs) <= 4  # the first list, then at most once a second as memory climbs
    # The simulated training job comes and goes with its cycle; the other GPUs always run one.
    pid, used_mib, sm_util = next(p for lists in procs[0]["d"].values() for p in (lists or []))
    assert used_mib > 0 and isinstance(sm_util, int)
    user, command, name = procs[0]["who"][str(pid)]
    assert user == "ubuntu" and command and name
    # Who a process is goes once per stream, not with every update of its memory.
    assert all(str(pid) not in m.get("who", {}) for m in procs[1:])


def test_host_figures_come_from_proc(lines: list[str]) -> None:
    host = [json.loads(line) for line in lines if '"type":"host"' in line]
    assert 1 <= len(host) <= 3  # at most once a second
    assert host[-1]["ram_total_mib"] > 0 and host[-1]["ram_used_mib"] > 0 and len(host[-1]["load"]) == 3


def test_decoded_batches_carry_every_value_and_the_new_fields(lines: list[str]) -> None:
    hello = json.loads(lines[0])
    batches = decode_lines(lines[1:], hello["fields"], simulated=True, skew_s=0.0)
    assert len(batches) == 30
    for batch in batches:
        assert [s.gpu for s in batch.samples] == [0, 1, 2, 3]
        h100 = batch.samples[0]
        assert h100.uuid and h100.sm_clock_max_mhz == 1980 and h100.pcie_gen_max == 5
        assert h100.mem_total_mib == 81559 and h100.power_limit_w == 700.0
        assert h100.temp_c is not None and h100.power_w is not None and h100.pstate and h100.pstate[0] == "P"
        assert h100.throttle_reasons is not None and h100.simulated is True and h100.source == "nvml"
        assert h100.to_dict()["uuid"] == h100.uuid
    last = batches[-1]
    procs = [p for s in last.samples for p in (s.processes or [])]
    assert procs and procs[0].user == "ubuntu" and procs[0].command and procs[0].sm_util_pct is not None
    assert last.host is not None and last.host.ram_total_mib and last.host.load_1m is not None
    assert batches[-1].t > batches[0].t


def test_values_carry_over_between_samples() -> None:
    decoder = AgentDecoder(["temp_c", "power_w", "pstate", "throttle_mask", "pcie_gen_current", "from_the_future"])
    decoder.feed('{"type":"devices","devices":[{"gpu":0,"uuid":"GPU-a","pcie_gen_max":5},'
                 '{"gpu":0,"uuid":"MIG-b","mig":{"parent_gpu":0,"device":1,"gi":3,"ci":0}}]}')
    first = decoder.feed('[100.5,[0,0,40,1,300.5,2,0,3,5,4,4,5,"x"],[1,0,40]]')
    assert first is not None
    a, b = first.samples
    assert (a.temp_c, a.power_w, a.pstate, a.throttle_reasons, a.idle, a.pcie_gen_current) == (
        40.0, 300.5, "P0", ["sw_power_cap"], True, 4)
    assert b.key == "0/mig1" and b.temp_c == 40.0 and b.power_w is None
    second = decoder.feed("[101.5,[0,1,null]]")
    assert second is not None
    assert second.samples[0].temp_c == 40.0 and second.samples[0].power_w is None  # kept; cleared
    assert second.samples[0].t == 101.5 and first.samples[0].t == 100.5  # earlier samples untouched
    decoder.feed('{"type":"procs","d":{"0":[[7,5,null]]},"who":{"7":["me","python x.py","python"]}}')
    decoder.feed('{"type":"host","cpu_pct":12.5,"ram_used_mib":1000,"ram_total_mib":2000,"load":[1,2,3]}')
    third = decoder.feed("[102.5]")
    assert third is not None and third.samples[0].processes is not None
    assert third.samples[0].processes[0].command == "python x.py" and third.samples[1].processes is None
    assert third.samples[0].processes[0].used_mib == 5.0 and third.samples[0].processes[0].sm_util_pct is None
    assert third.host is not None and (third.host.cpu_pct, third.host.load_15m) == (12.5, 3.0)


@pytest.mark.parametrize(
    "line",
    ["not json", "[]", '["t"]', "[1,[5,0,1]]", "[1,[0,99,1]]", "[1,[0,0]]", '[1,[0,0,"hot"]]', "[1,[0,0,true]]",
     '{"type":"devices","devices":[{"gpu":-1}]}', '{"type":"procs","d":{"0":[{"name":"no pid"}]}}',
     '{"type":"procs","d":{"0":[["7",1,2]]}}', '{"type":"procs","d":{},"who":{"7":["too","short"]}}',
     '{"type":"devices","devices":[{"gpu":0,"mig":{"device":1}}]}', "[1,[0,3,1.5]]", '"text"',
     "[" * 100_000 + "]" * 100_000,  # a hostile host: deeper than either JSON parser goes
     "[1,[0,0,1]] trailing", "\ud800"],
)
def test_malformed_lines_are_parse_errors(line: str) -> None:
    decoder = AgentDecoder(["temp_c", "power_w", "pstate", "throttle_mask"])
    decoder.feed('{"type":"devices","devices":[{"gpu":0}]}')
    with pytest.raises(ParseError):
        decoder.feed(line)


def test_non_finite_values_are_unknown() -> None:
    decoder = AgentDecoder(["temp_c"])
    decoder.feed('{"type":"devices","devices":[{"gpu":0}]}')
    batch = decoder.feed("[1,[0,0,NaN]]")
    assert batch is not None and batch.samples[0].temp_c is None
    # Tokens orjson refuses and Python's json reads (the agent's json.dumps may write them).
    batch = decoder.feed("[2,[0,0,-Infinity]]")
    assert batch is not None and batch.samples[0].temp_c is None
    batch = decoder.feed(f"[3,[0,0,{10**30}]]")  # past 64 bits: a number still, clipped when stored
    assert batch is not None and batch.samples[0].temp_c == 1e30


class _StubReader:
    """An NvmlReader stand-in: one device whose processes the test sets."""

    processes = True

    def __init__(self) -> None:
        self.handles = [("h0", 0, None)]
        self.statics = [{"gpu": 0, "uuid": "GPU-x", "mig": None}]
        self.procs: list[list[object]] | None = [[10, 100.0, 5]]

    def refresh(self) -> bool:
        return False

    def values(self, h: object, previous: object = None) -> list[object]:
        return [1] * 18

    def processes_of(self, position: int, h: object) -> list[list[object]] | None:
        return None if self.procs is None else [list(p) for p in self.procs]

    def identity(self, pid: int) -> list[object]:
        return ["me", f"python job{pid}.py", "python"]


def test_processes_go_at_once_when_the_set_changes_and_every_5_s_when_only_values_do() -> None:
    import io

    from gpuws.agent import telemetry_agent as agent

    out = io.StringIO()
    reader = _StubReader()
    streamer = agent.Streamer(reader, None, agent.Out(out))
    streamer.devices_message()

    def procs_sent(now: float) -> list[dict[str, object]]:
        out.seek(0)
        out.truncate()
        streamer.tick(now, lambda: 1000.0 + now)
        return [json.loads(line) for line in out.getvalue().splitlines() if '"procs"' in line]

    first = procs_sent(0.0)
    assert first and first[0]["d"] == {"0": [[10, 100.0, 5]]} and first[0]["who"] == {"10": ["me", "python job10.py",
                                                                                           "python"]}
    reader.procs = [[10, 200.0, 7]]  # memory grew: not sent before 5 s
    assert procs_sent(1.0) == [] and procs_sent(2.0) == []
    reader.procs = [[10, 200.0, 7], [11, 1.0, None]]  # a new process: at once, named once
    sent = procs_sent(3.0)
    assert sent and sent[0]["d"] == {"0": [[10, 200.0, 7], [11, 1.0, None]]} and list(sent[0]["who"]) == ["11"]
    reader.procs = [[10, 300.0, 7], [11, 1.0, None]]
    assert procs_sent(4.0) == []
    later = procs_sent(5.0)
    assert later and later[0]["d"] == {"0": [[10, 300.0, 7], [11, 1.0, None]]} and "who" not in later[0]


def _mig_host(state_dir: Path) -> None:
    """GPU 0 (H100: GPM) and GPU 1 (A100: no GPM) split in two 3g.40gb slices each, a job on the first
    slice of each at 80 % load, the second slice empty."""
    import time

    from gpuws.sim.mig import create_gpu_instances, set_mig_mode
    from gpuws.sim.state import SimStateStore

    with SimStateStore(state_dir).update() as state:
        for index in (0, 1):
            gpu = state.gpu(index)
            gpu.set_load(0.0)  # no demo job holds the card, so MIG mode applies at once
            assert set_mig_mode([gpu], True, time.time()).code == 0
            assert create_gpu_instances([gpu], ["3g.40gb", "3g.40gb"], True).code == 0
            gpu.set_load(0.8)
            gpu.add_process("python3 train.py", 4096, gpu_instance_id=gpu.gpu_instances[0].gi_id,
                            compute_instance_id=0)


def test_mig_slices_carry_their_engine_activity_where_gpm_gives_it(tmp_path: Path) -> None:
    _mig_host(tmp_path / "state")
    lines = run_agent(tmp_path, "--hz", "10", "--count", "25")  # 2.5 s: GPM rates from the second second
    hello = json.loads(lines[0])
    assert "sm_active_pct" in hello["fields"] and hello["protocol"] == 2
    last = decode_lines(lines[1:], hello["fields"], simulated=True)[-1]
    slices = {s.key: s for s in last.samples if s.mig is not None}
    assert sorted(slices) == ["0/mig0", "0/mig1", "1/mig0", "1/mig1"]
    busy, spare = slices["0/mig0"], slices["0/mig1"]  # H100: GPM supported
    assert busy.util_gpu_pct is not None and 70 <= busy.util_gpu_pct <= 90  # follows the 80 % load
    assert busy.sm_active_pct is not None and 0 < busy.sm_active_pct <= busy.util_gpu_pct
    assert spare.util_gpu_pct == 0.0 and spare.sm_active_pct == 0.0  # idle is 0, not "not supported"
    for key in ("1/mig0", "1/mig1"):  # A100: no GPM, so not supported (null), never 0
        assert slices[key].util_gpu_pct is None and slices[key].sm_active_pct is None
    whole = [s for s in last.samples if s.mig is None]
    assert all(s.sm_active_pct is None for s in whole)  # GPM is read for slices only
    assert last.samples[0].to_dict()["sm_active_pct"] is None and busy.to_dict()["sm_active_pct"] > 0


def test_without_gpm_in_nvidia_ml_py_slices_are_not_supported() -> None:
    """An nvidia-ml-py older than GPM (no nvmlGpm* calls): the reader says "not supported", never 0."""
    from types import SimpleNamespace

    from gpuws.agent import telemetry_agent as agent

    class Old:
        NVMLError = RuntimeError

    gpm = agent.GpmReader(Old, lambda fn, *args: fn(*args))
    assert not gpm.available and gpm.read("parent", 0, 1) is None
    # One that has GPM but a card that does not support it.
    calls: list[str] = []
    new = SimpleNamespace(**{name: (lambda *a, name=name: calls.append(name)) for name in agent.GpmReader.NAMES})
    new.nvmlGpmQueryDeviceSupport = lambda h: SimpleNamespace(isSupportedDevice=0)
    gpm = agent.GpmReader(new, lambda fn, *args: fn(*args))
    assert gpm.available and gpm.read("parent", 0, 1) is None and gpm.read("parent", 0, 1) is None
    assert "nvmlGpmMigSampleGet" not in calls


def test_decoder_takes_slice_activity_and_an_older_agent_without_it() -> None:
    decoder = AgentDecoder(["util_gpu_pct", "mem_used_mib", "sm_active_pct"])
    decoder.feed('{"type":"devices","devices":[{"gpu":0},'
                 '{"gpu":0,"mig":{"parent_gpu":0,"device":0,"gi":1,"ci":0},"mem_total_mib":40448}]}')
    batch = decoder.feed("[5.0,[0,1,100],[1,0,77.8,1,4096,2,70]]")
    assert batch is not None
    whole, piece = batch.samples
    assert whole.util_gpu_pct is None and whole.sm_active_pct is None
    assert (piece.util_gpu_pct, piece.sm_active_pct, piece.mem_used_mib) == (77.8, 70.0, 4096.0)
    assert batch.stored_rows is not None  # the slice's activity goes to the store like a GPU's utilisation
    assert batch.stored_rows[1][METRIC_INDEX["util_gpu_pct"]] == np.float16(77.8)
    older = AgentDecoder(["util_gpu_pct", "mem_used_mib"])  # an agent of before GPM
    older.feed('{"type":"devices","devices":[{"gpu":0,"mig":{"parent_gpu":0,"device":0,"gi":1,"ci":0}}]}')
    old_batch = older.feed("[5.0,[0,1,4096]]")
    assert old_batch is not None and old_batch.samples[0].sm_active_pct is None


def test_decoded_rows_are_what_the_store_would_encode_itself() -> None:
    """The decoder hands the store its rows already encoded: they must equal `encode_rows` of the
    samples' own values, for ints, floats, unknowns and values beyond float16's range."""
    from gpuws.core.telemetry.store import _row_of, encode_rows

    decoder = AgentDecoder(["util_gpu_pct", "mem_used_mib", "pcie_rx_kib_s", "power_w", "temp_c", "fan_pct"])
    decoder.feed('{"type":"devices","devices":[{"gpu":0},{"gpu":1}]}')
    batches = [decoder.feed(line) for line in (
        "[1.0,[0,0,87,1,81000.5,2,123456,3,312.25,4,61,5,null],[1,0,12.5,1,1e12,2,-1e12,3,1e300,4,NaN,5,Infinity]]",
        "[2.0,[1,1,2048,3,-70000]]",
        "[3.0]",  # nothing changed: the rows are the last line's
        "[4.0,[0,5,40]]",
    )]
    for batch in batches:
        assert batch is not None and batch.stored_rows is not None
        with np.errstate(over="ignore"):  # 1e300 as float32: inf, which encode_rows clips
            expected = encode_rows(np.array([_row_of(s) for s in batch.samples], dtype=np.float32))
        np.testing.assert_array_equal(batch.stored_rows, expected)
    first, second, third, fourth = batches
    assert first is not None and first.samples[1].mem_used_mib == 1e12 and first.samples[1].temp_c is None
    assert second is not None and third is not None and fourth is not None
    assert third.stored_rows is second.stored_rows and fourth.stored_rows is not third.stored_rows


def test_pcie_throughput_and_other_slow_fields_are_read_once_a_second() -> None:
    """NVML measures PCIe throughput over its own 20 ms window (each call waits for it): the agent
    reads it with the other slow fields, once a second, and keeps the last value in between."""
    import io
    from types import SimpleNamespace

    from gpuws.agent import telemetry_agent as agent

    calls: dict[str, int] = {}

    def counted(name: str, value: object) -> object:
        def call(*args: object) -> object:
            calls[name] = calls.get(name, 0) + 1
            return value
        return call

    names = {
        "nvmlDeviceGetUtilizationRates": SimpleNamespace(gpu=50, memory=20),
        "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=80 << 30, used=1 << 30),
        "nvmlDeviceGetPerformanceState": 0, "nvmlDeviceGetTemperature": 60, "nvmlDeviceGetPowerUsage": 300_000,
        "nvmlDeviceGetClockInfo": 1800, "nvmlDeviceGetPcieThroughput": 1234, "nvmlDeviceGetCurrPcieLinkGeneration": 5,
        "nvmlDeviceGetCurrPcieLinkWidth": 16, "nvmlDeviceGetFanSpeed": 30, "nvmlDeviceGetTotalEccErrors": 0,
        "nvmlDeviceGetEncoderUtilization": [0, 1], "nvmlDeviceGetDecoderUtilization": [0, 1],
        "nvmlDeviceGetCount": 1, "nvmlDeviceGetHandleByIndex": "h0", "nvmlDeviceGetUUID": "GPU-x",
        "nvmlDeviceGetName": "Fake", "nvmlDeviceGetMaxClockInfo": 1980, "nvmlDeviceGetMaxPcieLinkGeneration": 5,
        "nvmlDeviceGetMaxPcieLinkWidth": 16, "nvmlDeviceGetEnforcedPowerLimit": 700_000,
        "nvmlDeviceGetMigMode": [0, 0], "nvmlDeviceGetCurrentClocksEventReasons": 0,
    }
    nvml = SimpleNamespace(NVMLError=RuntimeError, NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2,
                           NVML_PCIE_UTIL_TX_BYTES=0, NVML_PCIE_UTIL_RX_BYTES=1, NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
                           NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_VOLATILE_ECC=0,
                           **{name: counted(name, value) for name, value in names.items()})
    out = io.StringIO()
    streamer = agent.Streamer(agent.NvmlReader(nvml, processes=False), None, agent.Out(out))
    streamer.devices_message()
    calls.clear()
    for k in range(20):  # 2 s at 10 Hz
        streamer.tick(k * 0.1, lambda: 1000.0)
    assert calls["nvmlDeviceGetTemperature"] == 20 and calls["nvmlDeviceGetClockInfo"] == 40  # every sample
    assert calls["nvmlDeviceGetPcieThroughput"] == 2 * 2 and calls["nvmlDeviceGetFanSpeed"] == 2  # once a second
    batches = decode_lines(out.getvalue().splitlines(), list(agent.FIELDS))
    assert all(b.samples[0].pcie_rx_kib_s == 1234.0 for b in batches)  # kept between reads


def test_the_first_sample_of_a_stream_carries_its_processes(lines: list[str]) -> None:
    """The process lists of a tick go before that tick's sample line: `gpuws watch --json` showed
    `"processes": null` ("cannot tell") on its first sample though the agent had read them."""
    hello = json.loads(lines[0])
    first = decode_lines(lines[1:], hello["fields"], simulated=True)[0]
    assert all(s.processes is not None for s in first.samples)
    assert any(s.processes for s in first.samples)  # the simulated host runs jobs on its GPUs
