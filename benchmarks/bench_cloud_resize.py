"""The provider resize against moto: `python -m benchmarks.bench_cloud_resize`.

The EC2 test bed of the tests (tests/support/ec2_testbed.py: moto's EC2 server, the real `aws`
CLI, a demo host coming up at the instance's loopback address on each start) and gpuws' one
implementation (`gpuws.app.cloud.resize_instance`, what `gpuws resize NAME type:T` and the window
run once the user typed the confirmation). Each round changes the type there and back (1/8 of an
L4 <-> 1/2), from the call to "verified", split by step. gpuws' own share is everything but the
provider CLI calls and the waits for the host (its SSH answering after the boot, and the probe
command it runs: nvidia-smi there): the SSH connect (handshake, auth), verify, journal, audit and
profile writes, parsing, its own overhead between them. Target: gpuws' own under 1 s.
Medians of GPUWS_BENCH_ROUNDS (default 6) resizes.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROUNDS = int(os.environ.get("GPUWS_BENCH_ROUNDS", "6"))
TARGET_OWN_S = 1.0


async def _rounds(bed: object, profile_name: str, rounds: int) -> list[dict[str, float]]:
    from gpuws.app.cloud import resize_instance, wait_for_ssh
    from gpuws.core.models import HostProfile
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.resize.provider import TOKEN_ENV
    from gpuws.remote.hostkeys import KnownHosts
    from gpuws.remote.provider_ops import ProviderCli
    from tests.support.ec2_testbed import PASSWORD

    known = KnownHosts([Path(os.environ["HOME"]) / "known_hosts"])

    async def reach(at: HostProfile) -> object:
        return await wait_for_ssh(at, connection_options={"password": PASSWORD, "accept_new": True,
                                                          "known_hosts": known})

    results: list[dict[str, float]] = []
    for _ in range(rounds):
        profile = ProfileStore().get(profile_name)
        target = "g6f.4xlarge" if profile.slice_profile == "g6f.large" else "g6f.large"
        cli = ProviderCli("aws", TOKEN_ENV["aws"], "AKIABENCHMARK0000:bench-secret")
        started = time.perf_counter()
        done = await resize_instance(profile, f"type:{target}", reach=reach, cli=cli)  # type: ignore[arg-type]
        total = time.perf_counter() - started
        assert done.ok, done.error
        steps: dict[str, float] = defaultdict(float)
        external = 0.0
        for step in done.steps:
            if step.step == "total":
                continue
            steps[step.step] += step.seconds
            external += step.seconds if step.external else 0.0
        steps["TOTAL (confirmation to verified)"] = total
        steps["gpuws' own (total - CLI calls - waits for the host)"] = total - external
        steps["gpuws' own without the SSH connect"] = total - external - steps["SSH connect"]
        results.append(dict(steps))
    return results


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from gpuws.core.models import AddressFrom, AuthMethod, HostProfile, ProviderInfo
    from gpuws.core.profiles import ProfileStore
    from tests.support import ec2_testbed

    with tempfile.TemporaryDirectory(prefix="gpuws-bench-cloud-") as tmp:
        os.environ.update({"GPUWS_CONFIG_DIR": f"{tmp}/config", "XDG_DATA_HOME": f"{tmp}/data", "HOME": tmp,
                           "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1"})
        moto, url = ec2_testbed.start_moto()
        bed = ec2_testbed.Hypervisor(url, Path(tmp) / "machines").start()
        os.environ["AWS_ENDPOINT_URL"] = bed.url
        try:
            subnet, _ = bed.network()
            instance_id = bed.launch(subnet, "127.0.0.10", "g6f.large")
            ProfileStore().add(HostProfile(
                name="bench-cloud", host="127.0.0.10", port=bed.ssh_port, user="demo", auth=AuthMethod.PASSWORD,
                provider=ProviderInfo(kind="aws", instance_id=instance_id, region=ec2_testbed.REGION,
                                      address_from=AddressFrom.PRIVATE), slice_profile="g6f.large"))
            asyncio.run(_rounds(bed, "bench-cloud", 1))  # warm up imports and caches
            results = asyncio.run(_rounds(bed, "bench-cloud", ROUNDS))
        finally:
            bed.stop()
            ec2_testbed.stop_process(moto)
    names = list(results[0])
    print(f"provider resize against moto + the real aws CLI (g6f.large <-> g6f.4xlarge), median of {ROUNDS}, "
          f"{os.cpu_count()} CPUs")
    for name in names:
        values = [r.get(name, 0.0) for r in results]
        print(f"  {name:<48} {statistics.median(values):8.3f} s")
    own = statistics.median(r["gpuws' own (total - CLI calls - waits for the host)"] for r in results)
    print(f"  target: gpuws' own under {TARGET_OWN_S:g} s: {'met' if own < TARGET_OWN_S else 'NOT met'}"
          f" (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
