"""Fuzzing the parsers that read untrusted text (issue 13): nvidia-smi XML and query CSV, telemetry
agent JSON lines, ssh_config, known_hosts and profiles.toml.

Inputs are the real fixtures (tests/fixtures/real, the ssh -G parity corpus) mutated by Hypothesis:
slices cut, duplicated or replaced with hostile text, truncated, nested deep. The only exceptions
allowed out are the project's own (`GpuwsError` subclasses). Deterministic (derandomized) and
bounded by example counts so the whole module runs in well under a minute in CI.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import asyncssh
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuws.core.errors import GpuwsError
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.nvsmi.query_csv import parse_query_csv, parse_query_line
from gpuws.core.nvsmi.xml_inventory import parse_nvidia_smi_xml
from gpuws.core.profiles import ProfileStore, encode_profiles
from gpuws.core.sshconfig import import_ssh_config
from gpuws.core.telemetry.sample import sample_from_agent
from gpuws.remote.hostkeys import parse_known_hosts
from gpuws.remote.telemetry import _json_line
from tests.core.nvsmi_fixtures import H100, H100_MIG, capture_section
from tests.core.test_sshconfig_parity import CORPUS
from tests.support.real_fixtures import REAL_FIXTURES

FIXTURES = REAL_FIXTURES

# A failing example is printed in full; a 50 kB XML seed makes Hypothesis warn about that.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HOSTILE_PIECES = [
    "\x00", "\n", "\r\n", "\x1b[2J", "\u202e", "\u200b", "\udcff", "\ufeff", "<", ">", "&", "&#0;", "]]>",
    "<!DOCTYPE x [<!ENTITY a 'aaaa'>]>", "&a;", "<![CDATA[", "-->", "<!--", '"', "'", "\\", "#", "=", ",",
    "[", "]", "{", "}", "[[hosts]]", "Include ", "Host ", "Match exec x", "%", "${", "|1|", "@revoked ",
    "@cert-authority ", "-16x", "-1", "1e999", "NaN", "99999999999999999999", "N/A", "[Not Supported]",
    "[" * 3000, "{" * 3000, "a" * 5000,
]


def xml_seeds() -> list[str]:
    return [p.read_text() for p in sorted((FIXTURES / "nvidia-smi-xml").glob("*.xml"))[:6]]


def csv_seeds() -> list[str]:
    return [capture_section(path, f"{state} :: query-gpu") for path in (H100, H100_MIG) for state in ("idle", "load")]


def agent_seeds() -> list[str]:
    # The agent's own field names (gpuws/agent/telemetry_agent.py FIELDS): `util_gpu` was read as unset.
    record = {"gpu": 0, "uuid": "GPU-0", "util_gpu_pct": 50.0, "mem_used_mib": 1024, "power_w": 120.5, "pstate": "P0",
              "throttle_mask": 4, "processes": [{"pid": 12, "name": "python3", "used_mib": 800.0}],
              "mig": {"parent_gpu": 0, "device": 1, "gi": 2, "ci": 0}}
    return [json.dumps({"type": "batch", "t": 1700000000.5, "gpus": [record, {**record, "gpu": 1, "mig": None}]}),
            json.dumps({"type": "hello", "protocol": 1, "driver": "550.54", "simulated": False})]


def ssh_config_seeds() -> list[str]:
    return [text for text, _files, _aliases in CORPUS]


def known_hosts_seeds() -> list[str]:
    keys = [asyncssh.generate_private_key(alg) for alg in ("ssh-ed25519", "ecdsa-sha2-nistp256")]
    lines = [f"gpu{i},10.0.0.{i} {k.export_public_key().decode().strip()}" for i, k in enumerate(keys)]
    lines.append(f"@cert-authority *.example {keys[0].export_public_key().decode().strip()}")
    lines.append(f"@revoked [h]:2222 {keys[1].export_public_key().decode().strip()}")
    lines.append("|1|F1E1KeoE/eEWhi10WpGv4OdiO6Y=|3988QV0VE8wmZL7suNrYQLITLCg= ssh-ed25519 AAAA")
    return ["\n".join(lines) + "\n"]


def profiles_seeds() -> list[str]:
    profiles = [HostProfile(name="a100-box", host="203.0.113.7", user="ubuntu", auth=AuthMethod.KEY,
                            key_path="~/.ssh/id_ed25519", notes="team box", tags=["x"], price_per_hour=1.5),
                HostProfile(name="inner", host="10.0.0.2", jump="a100-box,ssh://ops@h:2222")]
    return [encode_profiles(profiles).decode()]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[str]) -> str:
    """A seed with a few random edits: cut, duplicate, insert hostile or random text, truncate."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(0, 4))):
        if not text:
            break
        start = draw(st.integers(0, len(text)))
        end = min(len(text), start + draw(st.integers(0, 200)))
        action = draw(st.sampled_from(["cut", "dup", "hostile", "random", "truncate"]))
        if action == "cut":
            text = text[:start] + text[end:]
        elif action == "dup":
            text = text[:end] + text[start:end] + text[end:]
        elif action == "hostile":
            text = text[:start] + draw(st.sampled_from(HOSTILE_PIECES)) + text[end:]
        elif action == "random":
            text = text[:start] + draw(st.text(max_size=40)) + text[end:]
        else:
            text = text[:start]
    return text


@FUZZ
@given(mutated(xml_seeds()))
def test_nvidia_smi_xml(text: str) -> None:
    with contextlib.suppress(GpuwsError):
        parse_nvidia_smi_xml(text)


@FUZZ
@given(mutated(csv_seeds()))
def test_query_csv(text: str) -> None:
    with contextlib.suppress(GpuwsError):
        parse_query_csv(text)
    fields = ["index", "name", "memory.used", "utilization.gpu", "power.draw"]
    for line in text.splitlines()[:5]:
        with contextlib.suppress(GpuwsError):
            parse_query_line(line, fields)


@FUZZ
@given(mutated(agent_seeds()))
def test_agent_json_lines(line: str) -> None:
    try:
        message = _json_line(line)
        gpus = message.get("gpus")
        for record in gpus if isinstance(gpus, list) else []:
            sample_from_agent(record, t=0.0)
    except GpuwsError:
        pass


@FUZZ
@given(mutated(ssh_config_seeds()))
def test_ssh_config(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    directory = tmp_path_factory.mktemp("cfg")
    path = directory / "config"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with contextlib.suppress(GpuwsError):
        import_ssh_config(path, ssh_dir=directory)


@FUZZ
@given(mutated(known_hosts_seeds()))
def test_known_hosts(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("kh") / "known_hosts"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    try:
        for entry in parse_known_hosts(path):
            entry.matches("gpu1", 22)
    except GpuwsError:
        pass


@FUZZ
@given(mutated(profiles_seeds()))
def test_profiles_toml(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("prof") / "profiles.toml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    store = ProfileStore(path)
    with contextlib.suppress(GpuwsError):
        store.load()


def test_what_the_fuzzer_found_is_a_parse_error() -> None:
    from gpuws.core.errors import ParseError

    with pytest.raises(ParseError, match="not valid text"):
        parse_nvidia_smi_xml("<nvidia_smi_log>\udcff</nvidia_smi_log>")
    with pytest.raises(ParseError, match="nested too deeply"):
        _json_line("[" * 100_000)


# -- the unmutated seeds parse to their known values --------------------------------------------------
# A parser that refused everything would pass every fuzz test above; these fail for it. Where the
# known values come from the seed text itself, they are read by a different reader (a regular
# expression, the csv or json module) than the parser under test.


def test_nvidia_smi_xml_seeds_parse_to_their_gpus() -> None:
    import re

    seeds = xml_seeds()
    assert len(seeds) == 6
    for text in seeds:
        gpus = parse_nvidia_smi_xml(text)
        assert [g.name for g in gpus] == re.findall(r"<product_name>\s*(.*?)\s*</product_name>", text)
        assert [g.uuid for g in gpus] == re.findall(r"<uuid>\s*(.*?)\s*</uuid>", text)
        assert [g.index for g in gpus] == list(range(len(re.findall(r"<gpu id=", text))))


def test_query_csv_seeds_parse_to_their_rows() -> None:
    import csv
    import io

    for text in csv_seeds():
        table = [row for row in csv.reader(io.StringIO(text), skipinitialspace=True) if row]
        header, body = [h.strip() for h in table[0]], table[1:]
        rows = parse_query_csv(text)
        assert len(rows) == len(body) >= 1
        assert [row["index"] for row in rows] == [line[header.index("index")].strip() for line in body]
        assert [row["name"] for row in rows] == [line[header.index("name")].strip() for line in body]
        fields = [h.split(" [")[0] for h in header]
        line = text.strip().splitlines()[1]
        assert parse_query_line(line, fields) == rows[0]


def test_agent_json_seeds_parse_to_their_samples() -> None:
    batch, hello = agent_seeds()
    message = _json_line(batch)
    assert message == json.loads(batch)
    samples = [sample_from_agent(record, t=0.0) for record in message["gpus"]]
    assert [(s.gpu, s.uuid, s.util_gpu_pct, s.mem_used_mib, s.power_w, s.pstate) for s in samples] == [
        (0, "GPU-0", 50.0, 1024, 120.5, "P0"), (1, "GPU-0", 50.0, 1024, 120.5, "P0")]
    first, second = samples
    assert [(p.pid, p.name, p.used_mib) for p in first.processes or []] == [(12, "python3", 800.0)]
    assert first.mig is not None and (first.mig.parent_gpu, first.mig.gi) == (0, 2) and second.mig is None
    assert _json_line(hello)["driver"] == "550.54"


def test_ssh_config_seed_parses_to_its_hosts(tmp_path: Path) -> None:
    # The first corpus seed, whose values `ssh -G` confirms (tests/core/test_sshconfig_parity.py).
    path = tmp_path / "config"
    path.write_text(ssh_config_seeds()[0])
    found = {p.name: (p.host, p.port, p.user) for p in import_ssh_config(path, ssh_dir=tmp_path).profiles}
    assert found == {"bastion3": ("10.0.0.3", 22, "ops"), "gpu": ("gpu.example.com", 2222, "first")}


def test_known_hosts_seed_parses_to_its_entries(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(known_hosts_seeds()[0])
    entries = parse_known_hosts(path)
    assert [(e.line_no, e.marker, e.hosts) for e in entries] == [
        (1, None, "gpu0,10.0.0.0"), (2, None, "gpu1,10.0.0.1"), (3, "cert-authority", "*.example"),
        (4, "revoked", "[h]:2222")]
    assert [e.matches("gpu1", 22) for e in entries] == [False, True, False, False]
    assert entries[3].matches("h", 2222) and entries[2].matches("gpu.example", 22)


def test_profiles_toml_seed_parses_to_its_profiles(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(profiles_seeds()[0])
    store = ProfileStore(path)
    loaded = {p.name: p for p in store.load()}
    assert store.state.broken == [] and store.state.read_only is None and store.state.warnings == []
    assert sorted(loaded) == ["a100-box", "inner"]
    box = loaded["a100-box"]
    assert (box.host, box.user, box.auth, box.key_path, box.notes, box.tags, box.price_per_hour) == (
        "203.0.113.7", "ubuntu", AuthMethod.KEY, "~/.ssh/id_ed25519", "team box", ["x"], 1.5)
    assert (loaded["inner"].host, loaded["inner"].jump) == ("10.0.0.2", "a100-box,ssh://ops@h:2222")
