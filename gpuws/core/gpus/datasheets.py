"""Datasheet peaks of NVIDIA data-centre and workstation GPUs (the registry's datasheet figures).

All throughput figures are **dense**: where NVIDIA's datasheet prints a dense figure it is used as
printed; sparse tensor figures (marked with an asterisk) are halved only where no dense one is
printed. GEMM figures are tensor-core peaks except fp32, which is the non-tensor (CUDA core) peak.
`None` means the card has no such format. Memory bandwidth is GB/s (10^9 bytes/s). NVLink is the
card's total bidirectional bandwidth in GB/s, as datasheets print it (so one direction is half).
"""

from __future__ import annotations

from dataclasses import dataclass

# Per-direction theoretical PCIe bandwidth of an x16 link, GB/s (after 8b/10b or 128b/130b coding).
PCIE_X16_GB_S = {1: 4.0, 2: 8.0, 3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}


@dataclass(frozen=True)
class Datasheet:
    """Peak figures of one GPU model, from NVIDIA's datasheet for it."""

    model: str
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    memory_gb_s: float
    pcie_gen: int
    pcie_width: int
    nvlink_gb_s: float | None
    ecc: bool = True  # ECC memory available (GeForce cards have none)
    source: str = ""

    def gemm_peak(self, check: str) -> float | None:
        """The peak for a GEMM check name such as "gemm_bf16"."""
        return {
            "gemm_fp32": self.fp32_tflops,
            "gemm_tf32": self.tf32_tflops,
            "gemm_fp16": self.fp16_tflops,
            "gemm_bf16": self.bf16_tflops,
            "gemm_fp8": self.fp8_tflops,
        }.get(check)

    def pcie_gb_s(self, gen: int | None = None, width: int | None = None) -> float | None:
        """Theoretical one-direction PCIe bandwidth for a link (the card's own by default)."""
        per_x16 = PCIE_X16_GB_S.get(gen or self.pcie_gen)
        return None if per_x16 is None else per_x16 * (width or self.pcie_width) / 16


def _ds(model: str, fp32: float, tf32: float | None, fp16: float | None, bf16: float | None,
        fp8: float | None, mem: float, gen: int, nvlink: float | None, source: str,
        ecc: bool = True) -> Datasheet:
    return Datasheet(model, fp32, tf32, fp16, bf16, fp8, mem, gen, 16, nvlink, ecc, source)


DATASHEETS: dict[str, Datasheet] = {
    d.model: d
    for d in (
        # NVIDIA Tesla V100 datasheet (v1.1, 2020): SXM2 15.7 FP32, 125 tensor, 900 GB/s, NVLink 300 GB/s.
        _ds("V100 SXM2", 15.7, None, 125, None, None, 900, 3, 300, "NVIDIA V100 Tensor Core GPU datasheet"),
        # Same datasheet, PCIe column: 14 FP32, 112 tensor, 900 GB/s.
        _ds("V100 PCIe", 14.0, None, 112, None, None, 900, 3, None, "NVIDIA V100 Tensor Core GPU datasheet"),
        # NVIDIA T4 datasheet: 8.1 FP32, 65 FP16 (mixed precision), 320 GB/s, PCIe Gen3 x16.
        _ds("T4", 8.1, None, 65, None, None, 320, 3, None, "NVIDIA T4 Tensor Core GPU datasheet"),
        # NVIDIA A10 datasheet: 31.2 FP32, TF32 62.5 (125*), BF16/FP16 125 (250*), 600 GB/s, Gen4.
        _ds("A10", 31.2, 62.5, 125, 125, None, 600, 4, None, "NVIDIA A10 Tensor Core GPU datasheet"),
        # A10G (AWS G5 only, no public NVIDIA datasheet): figures as AWS publishes them for the G5
        # instances: 31.2 FP32, 35 TF32 (70*), 70 FP16/BF16 (140*), 600 GB/s GDDR6, Gen4.
        _ds("A10G", 31.2, 35.0, 70, 70, None, 600, 4, None, "AWS EC2 G5 instance specifications (A10G)"),
        # NVIDIA A100 datasheet (2021): FP32 19.5, TF32 156 (312*), BF16/FP16 312 (624*);
        # 40GB 1,555 GB/s; 80GB PCIe 1,935 GB/s; 80GB SXM 2,039 GB/s; NVLink 600 GB/s (PCIe: bridge).
        _ds("A100 40GB PCIe", 19.5, 156, 312, 312, None, 1555, 4, 600, "NVIDIA A100 Tensor Core GPU datasheet"),
        _ds("A100 80GB PCIe", 19.5, 156, 312, 312, None, 1935, 4, 600, "NVIDIA A100 Tensor Core GPU datasheet"),
        _ds("A100 40GB SXM", 19.5, 156, 312, 312, None, 1555, 4, 600, "NVIDIA A100 Tensor Core GPU datasheet"),
        _ds("A100 80GB SXM", 19.5, 156, 312, 312, None, 2039, 4, 600, "NVIDIA A100 Tensor Core GPU datasheet"),
        # NVIDIA L4 datasheet: FP32 30.3, TF32 120*, BF16/FP16 242*, FP8 485*, 300 GB/s, Gen4.
        _ds("L4", 30.3, 60, 121, 121, 242.5, 300, 4, None, "NVIDIA L4 Tensor Core GPU datasheet"),
        # NVIDIA L40S datasheet: FP32 91.6, TF32 183 (366*), BF16/FP16 362.05 (733*), FP8 733
        # (1,466*), 864 GB/s, Gen4. The dense figures are the datasheet's own, not sparse / 2.
        _ds("L40S", 91.6, 183, 362.05, 362.05, 733, 864, 4, None, "NVIDIA L40S GPU datasheet"),
        # NVIDIA Ada Lovelace architecture whitepaper v1.1, RTX 4090 column: FP32 82.6,
        # FP16/BF16 tensor with FP32 accumulate 165.2, TF32 82.6, FP8 (FP32 acc.) 330.3, 1,008 GB/s.
        _ds("RTX 4090", 82.6, 82.6, 165.2, 165.2, 330.3, 1008, 4, None,
            "NVIDIA Ada Lovelace GPU architecture whitepaper (GeForce RTX 4090)", ecc=False),
        # Same whitepaper, RTX 6000 Ada column: FP32 91.1, FP16/BF16 364.2 (728.5*), TF32 182.1,
        # FP8 728.5; NVIDIA RTX 6000 Ada datasheet: 960 GB/s, Gen4 x16.
        _ds("RTX 6000 Ada", 91.1, 182.1, 364.2, 364.2, 728.5, 960, 4, None,
            "NVIDIA RTX 6000 Ada Generation datasheet / Ada architecture whitepaper"),
        # NVIDIA H100 datasheet: PCIe FP32 51, TF32 756*, BF16/FP16 1,513*, FP8 3,026*, 2 TB/s,
        # NVLink bridge 600 GB/s, Gen5.
        _ds("H100 PCIe", 51, 378, 756, 756, 1513, 2000, 5, 600, "NVIDIA H100 Tensor Core GPU datasheet"),
        # Same datasheet, SXM: FP32 67, TF32 989*, BF16/FP16 1,979*, FP8 3,958*, 3.35 TB/s, NVLink 900.
        _ds("H100 SXM", 67, 494.5, 989.5, 989.5, 1979, 3350, 5, 900, "NVIDIA H100 Tensor Core GPU datasheet"),
        # Same datasheet, NVL: FP32 60, TF32 835*, BF16/FP16 1,671*, FP8 3,341*, 3.9 TB/s, NVLink 600.
        _ds("H100 NVL", 60, 417.5, 835.5, 835.5, 1670.5, 3900, 5, 600, "NVIDIA H100 Tensor Core GPU datasheet"),
        # NVIDIA H200 datasheet, SXM: compute as H100 SXM, 4.8 TB/s HBM3e, NVLink 900.
        _ds("H200", 67, 494.5, 989.5, 989.5, 1979, 4800, 5, 900, "NVIDIA H200 Tensor Core GPU datasheet"),
        # Same datasheet, H200 NVL: FP32 60, TF32 835*, BF16/FP16 1,671*, FP8 3,341*, 4.8 TB/s.
        _ds("H200 NVL", 60, 417.5, 835.5, 835.5, 1670.5, 4800, 5, 900, "NVIDIA H200 Tensor Core GPU datasheet"),
        # NVIDIA HGX B200 datasheet, per-GPU figures: FP32 75, TF32 2.2 PF* (1,100 dense), BF16/FP16
        # 4.5 PF* (2,250), FP8 9 PF* (4,500), 8 TB/s HBM3e, NVLink 1.8 TB/s.
        _ds("B200", 75, 1100, 2250, 2250, 4500, 8000, 5, 1800, "NVIDIA HGX B200 datasheet (per GPU)"),
    )
}
