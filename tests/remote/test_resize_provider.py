"""Provider resize through a stand-in CLI that records its calls: argv exactly as templated, the
token only in the environment, never in argv, logs, the plan or any output."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from gpuws.core.models import ProviderInfo
from gpuws.core.resize.provider import plan_provider_resize
from gpuws.core.runner import LocalRunner
from gpuws.remote.resize import PROVIDER_ROLLED_BACK, TARGET_VERIFIED, run_provider_resize

TOKEN = "AKIDEXAMPLE42:verysecretkey99"  # a test value

STAND_IN = """#!{python}
import json, os, sys
with open({log!r}, "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "env": {{k: v for k, v in os.environ.items()
                                                    if k.startswith("TENCENTCLOUD")}}}}) + "\\n")
if os.environ.get("FAIL_ON") and os.environ["FAIL_ON"] in sys.argv:
    print("error: request denied for", os.environ.get("TENCENTCLOUD_SECRET_KEY"), file=sys.stderr)
    sys.exit(1)
print("{{\\"RequestId\\": \\"ok\\"}}")
"""


def _stand_in(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.jsonl"
    script = bin_dir / "tccli"
    script.write_text(STAND_IN.format(python=sys.executable, log=str(log)))
    script.chmod(0o755)
    return bin_dir, log


async def test_tencent_preset_runs_in_order_with_token_in_env_only(tmp_path: Path) -> None:
    bin_dir, log = _stand_in(tmp_path)
    plan = plan_provider_resize(ProviderInfo("tencent", "ins-abc123", "ap-guangzhou"), "GN10Xp.2XLARGE40")
    runner = LocalRunner(dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}"))
    probes: list[str] = []

    async def reconnect() -> str:
        probes.append("probe")
        return "NVIDIA H100 80GB HBM3"

    result = await run_provider_resize(plan, token=TOKEN, reconnect=reconnect, runner=runner)
    assert result.outcome == TARGET_VERIFIED and result.ok and probes == ["probe"]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["argv"][1] for c in calls] == [
        "StopInstances", "DescribeInstances", "ResetInstancesType", "StartInstances", "DescribeInstances"]
    assert calls[2]["argv"] == ["cvm", "ResetInstancesType", "--region", "ap-guangzhou", "--InstanceIds",
                                '["ins-abc123"]', "--InstanceType", "GN10Xp.2XLARGE40"]
    for call in calls:
        assert call["env"] == {"TENCENTCLOUD_SECRET_ID": "AKIDEXAMPLE42", "TENCENTCLOUD_SECRET_KEY": "verysecretkey99"}
        assert not any("secret" in a.lower() or "AKID" in a for a in call["argv"])
    shown = json.dumps([plan.to_dict(), result.to_dict()])
    assert "verysecretkey99" not in shown and "AKIDEXAMPLE42" not in shown
    assert "TENCENTCLOUD_SECRET_KEY=***" in shown


async def test_failed_modify_starts_the_old_instance_again_without_leaking(tmp_path: Path) -> None:
    bin_dir, log = _stand_in(tmp_path)
    plan = plan_provider_resize(ProviderInfo("tencent", "ins-abc123", "ap-guangzhou"), "GN7.LARGE20")
    runner = LocalRunner(dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", FAIL_ON="ResetInstancesType"))

    async def reconnect() -> str:
        return "NVIDIA A100-SXM4-80GB"

    result = await run_provider_resize(plan, token=TOKEN, reconnect=reconnect, runner=runner)
    assert result.outcome == PROVIDER_ROLLED_BACK and not result.ok
    assert [json.loads(line)["argv"][1] for line in log.read_text().splitlines()] == [
        "StopInstances", "DescribeInstances", "ResetInstancesType", "StartInstances", "DescribeInstances"]
    assert result.error and "denied for ***" in result.error
    assert "verysecretkey99" not in json.dumps(result.to_dict())
