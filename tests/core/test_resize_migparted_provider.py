"""mig-parted YAML import/export, provider command templates and the audit log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuws.core.errors import ParseError, ValidationError
from gpuws.core.models import ProviderInfo
from gpuws.core.paths import data_dir
from gpuws.core.resize.audit import AuditLog, AuditRecord
from gpuws.core.resize.catalog import model_by_key
from gpuws.core.resize.layout import FULL_LAYOUT, LayoutError, parse_target
from gpuws.core.resize.migparted import export_mig_parted, import_mig_parted, layout_for_gpu
from gpuws.core.resize.provider import ProviderError, plan_provider_resize, redact, token_environment

H100 = model_by_key("h100-80gb")
A100 = model_by_key("a100-80gb")


def test_mig_parted_round_trip() -> None:
    layouts = {0: parse_target("7x1g.10gb", H100), 1: parse_target("4g.40gb,2g.20gb,1g.10gb", A100), 2: FULL_LAYOUT}
    text = export_mig_parted(layouts, "designing")
    assert text.startswith("version: v1\nmig-configs:\n  designing:\n")
    assert "1g.10gb: 7" in text and "mig-enabled: false" in text
    entries = import_mig_parted(text)["designing"]
    assert layout_for_gpu(entries, 0, H100) == layouts[0]
    assert layout_for_gpu(entries, 1, A100) == layouts[1]
    assert layout_for_gpu(entries, 2, None) == FULL_LAYOUT


def test_mig_parted_config_as_nvidia_writes_it() -> None:
    text = """
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  mixed:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
    - devices: [1]
      mig-enabled: true
      mig-devices: {}
"""
    configs = import_mig_parted(text)
    assert layout_for_gpu(configs["all-disabled"], 5, H100) == FULL_LAYOUT
    assert layout_for_gpu(configs["all-1g.10gb"], 3, H100).describe() == "7x1g.10gb"
    assert layout_for_gpu(configs["mixed"], 0, H100).describe() == "2x3g.40gb"
    assert layout_for_gpu(configs["mixed"], 1, H100).describe() == "mig"  # the last match wins
    with pytest.raises(LayoutError, match="no entry for GPU 2"):
        layout_for_gpu(configs["mixed"], 2, H100)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("version: v2\nmig-configs: {a: []}", "version: v1"),
        ("version: v1\nmig-configs: []", "mig-configs"),
        ("version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: yes please", "true or false"),
        ("version: v1\nmig-configs:\n  a:\n    - devices: [0]\n      mig-enabled: true\n"
         "      mig-devices: {1g.10gb: 99}", "from 0 to 7"),
        # A device-filter is accepted (mig-parted's rules); a malformed one is not.
        ("version: v1\nmig-configs:\n  a:\n    - device-filter: 'H100'\n      devices: all\n"
         "      mig-enabled: false", "device-filter"),
        ("version: v1\nmig-configs: {a: [{devices: [0], mig-enabled: false, mig-devices: {1g.10gb: 1}}]}",
         "mig-enabled: false"),
        ("!!python/object/apply:os.system ['echo pwned']", "not valid YAML"),
        ("{{{", "not valid YAML"),
    ],
)
def test_bad_mig_parted_configs_are_parse_errors(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        import_mig_parted(text)


def test_imported_layout_is_checked_against_the_gpu() -> None:
    entries = import_mig_parted("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, "
                                "mig-devices: {3g.40gb: 3}}]}")["a"]
    with pytest.raises(LayoutError, match="at most 2"):
        layout_for_gpu(entries, 0, H100)


@pytest.mark.parametrize(
    ("kind", "modify"),
    [
        ("aws", ["aws", "ec2", "modify-instance-attribute", "--instance-id", "i-0abc", "--instance-type",
                 "Value=p5.48xlarge", "--region", "us-east-1"]),
        ("gcp", ["gcloud", "compute", "instances", "set-machine-type", "i-0abc", "--machine-type", "p5.48xlarge",
                 "--zone", "us-east-1", "--quiet"]),
        ("alibaba", ["aliyun", "ecs", "ModifyInstanceSpec", "--RegionId", "us-east-1", "--InstanceId", "i-0abc",
                     "--InstanceType", "p5.48xlarge"]),
        ("tencent", ["tccli", "cvm", "ResetInstancesType", "--region", "us-east-1", "--InstanceIds",
                     '["i-0abc"]', "--InstanceType", "p5.48xlarge"]),
    ],
)
def test_presets_render_per_argument(kind: str, modify: list[str]) -> None:
    plan = plan_provider_resize(ProviderInfo(kind, "i-0abc", "us-east-1"), "p5.48xlarge")
    commands = {c.action: list(c.argv) for c in plan.commands}
    assert commands["modify"] == modify
    # `describe` (AWS: the address read back after the start, #31) comes last.
    order = ("stop", "wait_stopped", "modify", "start", "wait_running", "describe")
    assert list(commands) == [a for a in order if a in commands]
    assert all("{" not in a or a.startswith('{"expr"') for argv in commands.values() for a in argv)


def test_custom_templates_override_presets_and_values_cannot_inject() -> None:
    info = ProviderInfo("custom", "vm-7", "zone-a", commands={
        "stop": ["cloudctl", "stop", "{instance_id}"], "modify": ["cloudctl", "resize", "{instance_id}",
                                                                  "--to={instance_type}"],
        "start": ["cloudctl", "start", "{instance_id}", "--zone", "{region}"]})
    plan = plan_provider_resize(info, "gpu-1x")
    assert [list(c.argv) for c in plan.commands] == [
        ["cloudctl", "stop", "vm-7"], ["cloudctl", "resize", "vm-7", "--to=gpu-1x"],
        ["cloudctl", "start", "vm-7", "--zone", "zone-a"]]
    for bad in ["--profile=evil", "a b", "x;rm -rf /", "$(id)", ""]:
        with pytest.raises(ValidationError):
            plan_provider_resize(info, bad)
    with pytest.raises(ValidationError, match=r"provider\.region"):
        plan_provider_resize(ProviderInfo("aws", "i-1", None), "g5.xlarge")
    with pytest.raises(ProviderError, match="no provider command"):
        plan_provider_resize(ProviderInfo(None, "i-1", "r"), "g5.xlarge")
    with pytest.raises(ValidationError, match="unknown action"):
        plan_provider_resize(ProviderInfo("aws", "i-1", "r", commands={"explode": ["x"]}), "g5.xlarge")


def test_token_goes_to_the_environment_and_plans_show_stars() -> None:
    plan = plan_provider_resize(ProviderInfo("aws", "i-1", "eu-west-1"), "g5.xlarge")
    env = token_environment("aws", "AKIAEXAMPLE:s3cr3t/value")
    assert env == {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t/value"}
    shown = json.dumps(plan.to_dict())
    assert "AWS_ACCESS_KEY_ID=***" in shown and "s3cr3t" not in shown and "AKIAEXAMPLE" not in shown
    assert token_environment("gcp", "ya29.token") == {"CLOUDSDK_AUTH_ACCESS_TOKEN": "ya29.token"}
    with pytest.raises(ProviderError, match="ID:SECRET"):
        token_environment("tencent", "only-one-part")
    assert redact("denied for s3cr3t/value (AKIAEXAMPLE)", list(env.values())) == "denied for *** (***)"


def test_audit_log_appends_jsonl_under_data_dir(tmp_path: Path) -> None:
    log = AuditLog()
    assert log.path == data_dir() / "resize-audit.jsonl"
    log.append(AuditRecord("gpu1", 0, "mig", "7x1g.10gb", "full", "7x1g.10gb", "target verified", True))
    log.append(AuditRecord("gpu2", 1, "mig", "full", "2x3g.40gb", "2x3g.40gb",
                           "rolled back to previous layout (verified)", False))
    with log.path.open("a") as f:
        f.write('{"torn": ')  # a crash mid-write must not hide the other records
    assert [r.outcome for r in log.read()] == ["target verified", "rolled back to previous layout (verified)"]
    assert [r.host for r in log.read("gpu2")] == ["gpu2"]
    first = json.loads(log.path.read_text().splitlines()[0])
    assert first["before"] == "full" and first["after"] == "7x1g.10gb" and first["started_at"]
