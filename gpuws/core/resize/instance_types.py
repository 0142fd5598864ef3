"""The catalog of cloud instance types that slice one card: every fraction and the whole card.

On a rented cloud host a vGPU fraction is an instance type: AWS G6f gives 1/8, 1/4 and 1/2 of
an NVIDIA L4 and G6 the whole L4; Azure NVadsA10 v5 gives 1/6, 1/3, 1/2 and the whole A10;
Alibaba Cloud's vgn7i-vws slices an A10 the same way beside gn7i's whole card. Resizing between
them is a change of instance type through the provider (`core/resize/provider.py`).

Every figure below was read from the source named in `SOURCES` (URL and the date it was read).
A figure no source gave is `None` (or an empty price table), never a guess: prices especially
are sparse and change, so a host's own `--slice-price TYPE=PRICE` (or `type:TYPE=PRICE`)
always wins over the catalog (`price_for`).

`framebuffer_mib` is what the guest's `nvidia-smi` shows as total memory: for vGPU fractions the
vGPU profile's framebuffer (`NVIDIA L4-3Q`: 3072 MiB), for the whole card what the driver
reports (an L4 shows 23034 MiB, an A10 23028 MiB). Where no capture was found the provider's
nominal size is used and `matches_gpu` allows for driver-reserved memory (`FRAMEBUFFER_TOLERANCE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from fractions import Fraction
from types import MappingProxyType

# A guest may see less than the nominal framebuffer (ECC, driver-reserved memory; Azure's size
# table says so: "the actual GPU VRAM reported in the operating system will be little less"),
# never meaningfully more. 8 % below covers the whole A10 (24 GiB nominal, 23028 MiB reported:
# 6.3 % less) and is far from the next fraction down (the nearest pair, 1/3 and 1/2, is 33 % apart).
FRAMEBUFFER_TOLERANCE = 0.08
FRAMEBUFFER_ABOVE = 0.01  # rounding only

READ_ON = date(2026, 12, 4)


@dataclass(frozen=True)
class Source:
    """Where catalog figures come from, and when they were read."""

    key: str
    url: str
    read: date
    covers: str  # which figures of which types, in words


SOURCES: tuple[Source, ...] = (
    Source("aws-describe-instance-types",
           "https://github.com/getmoto/moto/blob/master/moto/ec2/resources/instance_types.json "
           "(moto 5.2.6's copy of the EC2 DescribeInstanceTypes answers)",
           READ_ON, "AWS g6f/g6: vCPUs, memory, GpuPartitionSize (the fraction), GPU memory per "
                    "DescribeInstanceTypes (22888 MiB for an L4, 2861/5722/11444 MiB for the fractions)"),
    Source("aws-ecs-fractional-gpus",
           "Amazon ECS Developer Guide, fractional GPUs on G6f (table 'GPU value / GPU fraction / GPU "
           "memory / Instance types'), as published in AWS's documentation sources",
           READ_ON, "AWS g6f: fraction and GPU memory (0.125 = 3 GB, 0.25 = 6 GB, 0.5 = 12 GB)"),
    Source("karpenter-dra-g6f",
           "https://github.com/aws/karpenter-provider-aws (website: 'Utilizing GPUs and EFAs with DRA', "
           "supported instance types; the generated DRA device table)",
           READ_ON, "AWS g6f: the vGPU product name the guest driver reports (g6f.large/xlarge "
                    "NVIDIA L4-3Q, g6f.2xlarge NVIDIA L4-6Q, g6f.4xlarge NVIDIA L4-12Q) and its memory "
                    "(3Gi, 6Gi, 12Gi); the whole L4 as 23034Mi"),
    Source("nvidia-modelopt-issue-l4-12q",
           "https://github.com/NVIDIA/Model-Optimizer (an issue's system information: "
           "'GPU name: NVIDIA L4-12Q, GPU memory size: 12288 MiB')",
           READ_ON, "an L4-12Q guest's nvidia-smi shows 12288 MiB"),
    Source("l4-capture",
           "tests/fixtures/real/nvidia-smi-captures/l4__550.90.07__table-and-a.txt "
           "(thamada/nvidia-smi, gls/L4_smi.py)",
           READ_ON, "a whole L4's nvidia-smi: 'NVIDIA L4', 23034 MiB"),
    Source("skypilot-aws-catalog",
           "https://github.com/skypilot-org/skypilot-catalog/blob/001367d22a0033fac286a8c71aeac7109e431bcb/"
           "catalogs/v7/aws/vms.csv (built from the AWS Price List API; spot from the EC2 spot price "
           "history at that commit, the lowest zone per region)",
           READ_ON, "AWS g6.xlarge: on-demand price per region, spot where listed"),
    Source("cb-tumblebug-2336",
           "https://github.com/cloud-barista/cb-tumblebug/pull/2336 (2026-02-28: a spec listing of "
           "AWS us-east-2 with its hourly cost)",
           READ_ON, "AWS us-east-2 on-demand: g6f.2xlarge $0.475, g6f.4xlarge $0.95, g6.2xlarge "
                    "$0.9776, g6.4xlarge $1.3232"),
    Source("azure-nva10v5",
           "https://github.com/MicrosoftDocs/azure-docs/blob/main/articles/virtual-machines/nva10v5-series.md "
           "(the size table of the NVadsA10 v5 series page)",
           READ_ON, "Azure NVadsA10 v5: vCPUs, memory GiB, GPU partition (1/6, 1/3, 1/2, 1) and "
                    "GPU memory GiB (4, 8, 12, 24); no prices"),
    Source("azure-a10-4q-capture",
           "public nvidia-smi output of an Azure NVadsA10 v5 guest ('NVIDIA A10-4Q ... 4096MiB'), and "
           "dstackai/dstack's tests (NV6ads_A10_v5 -> NVIDIA A10-4Q)",
           READ_ON, "Standard_NV6ads_A10_v5: vGPU profile NVIDIA A10-4Q, 4096 MiB"),
    Source("a10-capture",
           "public nvidia-smi output of whole NVIDIA A10 cards (0MiB / 23028MiB)",
           READ_ON, "a whole A10's nvidia-smi shows 23028 MiB"),
    Source("alibaba-vgn7i-vws",
           "https://help.aliyun.com (ECS instance families: vgn7i-vws, GPU-accelerated vGPU "
           "instance family table)",
           READ_ON, "Alibaba vgn7i-vws: vCPUs, memory GiB, 'NVIDIA A10 * 1/6' .. '* 1' and "
                    "'24GB * 1/6' .. '* 1'; no prices"),
    Source("alibaba-gn7i",
           "https://help.aliyun.com (ECS instance families: gn7i, ecs.gn7i-c8g1.2xlarge: "
           "8 vCPUs, 30 GiB, NVIDIA A10 * 1)",
           READ_ON, "Alibaba gn7i-c8g1.2xlarge: vCPUs, memory, whole A10; no prices"),
)

# Not published in any source read above (left None / empty, never estimated):
# - on-demand prices of g6f.large and g6f.xlarge (no source read gave one I could trust: two
#   secondary tables disagreed), and of every type outside the regions listed;
# - Azure NVadsA10 v5 and Alibaba vgn7i-vws/gn7i prices (the pricing pages are not in the sources
#   this catalog could read): set them with `gpuws hosts edit NAME --slice-price TYPE=PRICE`;
# - the vGPU profile names of Standard_NV12ads/NV18ads/NV36ads and of vgn7i-vws (no capture).


def _prices(**regions: float) -> Mapping[str, float]:
    return MappingProxyType({region.replace("_", "-"): price for region, price in regions.items()})


_NONE: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True)
class InstanceType:
    """One instance type: its share of one card and what it costs per hour where published."""

    provider: str  # "aws", "azure", "alibaba"
    name: str  # as the provider's API spells it: "g6f.large", "Standard_NV6ads_A10_v5"
    family: str  # "g6f", "g6", "NVadsA10_v5", "vgn7i-vws", "gn7i"
    card: str  # the physical card: "L4", "A10"
    fraction: Fraction  # of that one card; Fraction(1) for the whole card
    framebuffer_mib: int  # total memory as the guest's nvidia-smi shows it
    vgpu_profile: str | None  # the vGPU product name the guest shows ("NVIDIA L4-3Q"); None where
    # the type is the whole card in passthrough, or where no source named it
    vcpus: int
    memory_gib: float
    prices: Mapping[str, float] = field(default_factory=dict)  # on-demand per hour (USD) by region
    spot_prices: Mapping[str, float] = field(default_factory=dict)  # spot per hour (USD) by region, where listed
    sources: tuple[str, ...] = ()  # keys of SOURCES

    @property
    def whole_card(self) -> bool:
        """The type gives the whole card (no fraction)."""
        return self.fraction == 1

    @property
    def fraction_text(self) -> str:
        """"1/8", "1/2" or "full"."""
        return "full" if self.whole_card else f"{self.fraction.numerator}/{self.fraction.denominator}"

    def price(self, region: str | None) -> float | None:
        """The on-demand hourly price in `region`, or None where the catalog has none."""
        return self.prices.get(region) if region else None

    def spot_price(self, region: str | None) -> float | None:
        """The spot hourly price in `region` as last read, or None."""
        return self.spot_prices.get(region) if region else None


_L4_FULL_MIB = 23034  # nvidia-smi on a whole L4 (l4-capture; Karpenter's 23034Mi)
_A10_FULL_MIB = 23028  # nvidia-smi on a whole A10 (a10-capture)
_AWS_G6F = ("aws-describe-instance-types", "aws-ecs-fractional-gpus", "karpenter-dra-g6f")


def _aws(name: str, fraction: Fraction, fb: int, profile: str | None, vcpus: int, mem: float,
         prices: Mapping[str, float] = _NONE, spot: Mapping[str, float] = _NONE,
         sources: tuple[str, ...] = _AWS_G6F) -> InstanceType:
    family = name.split(".", 1)[0]
    return InstanceType("aws", name, family, "L4", fraction, fb, profile, vcpus, mem, prices, spot, sources)


_G6_SOURCES = ("aws-describe-instance-types", "l4-capture", "karpenter-dra-g6f")

CATALOG: tuple[InstanceType, ...] = (
    # AWS G6f: fractions of an NVIDIA L4 (NVIDIA vGPU, GRID driver in the guest).
    _aws("g6f.large", Fraction(1, 8), 3072, "NVIDIA L4-3Q", 2, 8),
    _aws("g6f.xlarge", Fraction(1, 8), 3072, "NVIDIA L4-3Q", 4, 16),
    _aws("g6f.2xlarge", Fraction(1, 4), 6144, "NVIDIA L4-6Q", 8, 32, _prices(us_east_2=0.475),
         sources=(*_AWS_G6F, "cb-tumblebug-2336")),
    _aws("g6f.4xlarge", Fraction(1, 2), 12288, "NVIDIA L4-12Q", 16, 64, _prices(us_east_2=0.95),
         sources=(*_AWS_G6F, "nvidia-modelopt-issue-l4-12q", "cb-tumblebug-2336")),
    # AWS G6: the whole L4 (passthrough; the guest shows "NVIDIA L4").
    _aws("g6.xlarge", Fraction(1), _L4_FULL_MIB, None, 4, 16,
         _prices(us_east_1=0.8048, us_east_2=0.8048, us_west_2=0.8048, ca_central_1=0.8936,
                 eu_central_1=1.0064, eu_north_1=0.8536, eu_west_2=1.0216, eu_west_3=1.0216,
                 ap_northeast_1=1.1672, ap_northeast_2=0.9896, ap_south_1=0.9664, ap_southeast_2=1.0464),
         _prices(us_east_1=0.3879, us_east_2=0.3000, us_west_2=0.3990),
         sources=(*_G6_SOURCES, "skypilot-aws-catalog")),
    _aws("g6.2xlarge", Fraction(1), _L4_FULL_MIB, None, 8, 32, _prices(us_east_2=0.9776),
         sources=(*_G6_SOURCES, "cb-tumblebug-2336")),
    _aws("g6.4xlarge", Fraction(1), _L4_FULL_MIB, None, 16, 64, _prices(us_east_2=1.3232),
         sources=(*_G6_SOURCES, "cb-tumblebug-2336")),
    # Azure NVadsA10 v5: GPU partitions of an NVIDIA A10 (GRID driver in the guest).
    InstanceType("azure", "Standard_NV6ads_A10_v5", "NVadsA10_v5", "A10", Fraction(1, 6), 4096,
                 "NVIDIA A10-4Q", 6, 55, sources=("azure-nva10v5", "azure-a10-4q-capture")),
    InstanceType("azure", "Standard_NV12ads_A10_v5", "NVadsA10_v5", "A10", Fraction(1, 3), 8192,
                 None, 12, 110, sources=("azure-nva10v5",)),
    InstanceType("azure", "Standard_NV18ads_A10_v5", "NVadsA10_v5", "A10", Fraction(1, 2), 12288,
                 None, 18, 220, sources=("azure-nva10v5",)),
    InstanceType("azure", "Standard_NV36ads_A10_v5", "NVadsA10_v5", "A10", Fraction(1), 24576,
                 None, 36, 440, sources=("azure-nva10v5",)),
    # Alibaba Cloud vgn7i-vws: vGPU slices of an NVIDIA A10; gn7i: the whole A10 in passthrough.
    InstanceType("alibaba", "ecs.vgn7i-vws-m4.xlarge", "vgn7i-vws", "A10", Fraction(1, 6), 4096,
                 None, 4, 30, sources=("alibaba-vgn7i-vws",)),
    InstanceType("alibaba", "ecs.vgn7i-vws-m8.2xlarge", "vgn7i-vws", "A10", Fraction(1, 3), 8192,
                 None, 10, 62, sources=("alibaba-vgn7i-vws",)),
    InstanceType("alibaba", "ecs.vgn7i-vws-m12.3xlarge", "vgn7i-vws", "A10", Fraction(1, 2), 12288,
                 None, 14, 93, sources=("alibaba-vgn7i-vws",)),
    InstanceType("alibaba", "ecs.vgn7i-vws-m24.7xlarge", "vgn7i-vws", "A10", Fraction(1), 24576,
                 None, 30, 186, sources=("alibaba-vgn7i-vws",)),
    InstanceType("alibaba", "ecs.gn7i-c8g1.2xlarge", "gn7i", "A10", Fraction(1), _A10_FULL_MIB,
                 None, 8, 30, sources=("alibaba-gn7i", "a10-capture")),
)

PROVIDERS: tuple[str, ...] = tuple(dict.fromkeys(t.provider for t in CATALOG))
_BY_KEY: dict[tuple[str, str], InstanceType] = {(t.provider, t.name): t for t in CATALOG}


def _normal(name: str) -> str:
    return name.strip().removeprefix("type:")


def instance_type(provider: str | None, name: str) -> InstanceType | None:
    """The catalog entry for `name` at `provider` ("aws", "azure", "alibaba"), or None.

    A `provider` of None or "custom" (a host whose commands are its own, e.g. Azure, which has no
    preset) finds the type by its name alone: names never repeat across providers.
    """
    name = _normal(name)
    if provider in (None, "custom"):
        found = [t for t in CATALOG if t.name == name]
        return found[0] if len(found) == 1 else None
    return _BY_KEY.get((provider, name))


def family_of(provider: str | None, name: str) -> tuple[InstanceType, ...]:
    """Every type of the same provider that slices the same card, the fractions and the whole
    card, smallest first (then by vCPUs, memory); empty when `name` is not in the catalog."""
    itype = instance_type(provider, name)
    if itype is None:
        return ()
    same = [t for t in CATALOG if t.provider == itype.provider and t.card == itype.card]
    return tuple(sorted(same, key=lambda t: (t.fraction, t.vcpus, t.memory_gib, t.name)))


def price_for(itype: InstanceType, region: str | None,
              overrides: Mapping[str, float] | None = None) -> tuple[float | None, str]:
    """The hourly price of `itype` and where it comes from: the host's own slice price
    (`--slice-price TYPE=PRICE` or `type:TYPE=PRICE`: "override") first, else the catalog's
    on-demand price in `region` ("catalog"), else (None, "none")."""
    for key in (itype.name, f"type:{itype.name}"):
        if overrides and key in overrides:
            return overrides[key], "override"
    price = itype.price(region)
    return (price, "catalog") if price is not None else (None, "none")


def matches_gpu(itype: InstanceType, framebuffer_mib: int, vgpu_profile: str | None) -> str | None:
    """None when a GPU with this framebuffer (MiB, as nvidia-smi shows it) and vGPU profile (the
    guest's vGPU product name, None for a card in passthrough) is what `itype` promises; else the
    reason in words, naming both. The framebuffer may be up to FRAMEBUFFER_TOLERANCE below the
    catalog's (driver-reserved memory, ECC), never more than FRAMEBUFFER_ABOVE above it."""
    promised = f"{itype.name} gives {itype.fraction_text} of an {itype.card}"
    low = itype.framebuffer_mib * (1 - FRAMEBUFFER_TOLERANCE)
    high = itype.framebuffer_mib * (1 + FRAMEBUFFER_ABOVE)
    seen = f"{framebuffer_mib} MiB" + (f" ({vgpu_profile})" if vgpu_profile else "")
    if not low <= framebuffer_mib <= high:
        return (f"the GPU seen has {seen}, but {promised} with {itype.framebuffer_mib} MiB "
                f"(at least {int(low)} MiB allowing for driver-reserved memory)")
    if itype.vgpu_profile is not None and _profile(vgpu_profile) != _profile(itype.vgpu_profile):
        shown = vgpu_profile or "no vGPU profile (a card in passthrough)"
        return f"the GPU seen is {shown}, but {promised} as {itype.vgpu_profile}"
    return None


def _profile(name: str | None) -> str:
    return (name or "").strip().upper()

