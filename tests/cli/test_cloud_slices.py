"""`gpuws slices NAME` for a cloud host (issue 31): its instance-type family from the catalog, every
fraction and the whole card, price per hour in the host's region, the change against now, the
current type marked; the host's own `--slice-price` wins over the catalog. Read from the profile
alone: the hosts below are TEST-NET addresses no test ever dials."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuws.app.cloud_slices import cloud_family_of
from gpuws.cli.main import main
from gpuws.core.profiles import ProfileStore


def _add(capsys: pytest.CaptureFixture[str], name: str, *extra: str) -> None:
    assert main(["hosts", "add", name, "--host", "203.0.113.9", "--provider", "aws", "--instance-id", "i-0abc",
                 "--currency", "USD", *extra]) == 0
    capsys.readouterr()


def _slices(capsys: pytest.CaptureFixture[str], name: str) -> dict[str, Any]:
    assert main(["slices", name, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_a_g6f_host_lists_its_family_with_prices_and_change_without_connecting(
        capsys: pytest.CaptureFixture[str]) -> None:
    _add(capsys, "l4box", "--region", "us-east-2", "--instance-type", "g6f.2xlarge")
    doc = _slices(capsys, "l4box")
    cloud = doc["cloud"]
    assert (cloud["provider"], cloud["region"], cloud["card"], cloud["current_type"]) == (
        "aws", "us-east-2", "L4", "g6f.2xlarge")
    rows = {r["type"]: r for r in cloud["types"]}
    assert list(rows) == ["g6f.large", "g6f.xlarge", "g6f.2xlarge", "g6f.4xlarge",
                          "g6.xlarge", "g6.2xlarge", "g6.4xlarge"]
    assert [r["fraction"] for r in cloud["types"]] == ["1/8", "1/8", "1/4", "1/2", "full", "full", "full"]
    assert [r["current"] for r in cloud["types"]].count(True) == 1 and rows["g6f.2xlarge"]["current"]
    # No price of its own: now is the current type's catalog price in its region.
    assert cloud["price_per_hour_now"] == 0.475 and cloud["price_now_source"] == "catalog"
    assert rows["g6f.4xlarge"]["price_per_hour"] == 0.95 and rows["g6f.4xlarge"]["price_change_per_hour"] == 0.475
    assert rows["g6.xlarge"]["price_change_per_hour"] == pytest.approx(0.3298)
    assert rows["g6f.large"]["price_per_hour"] is None and rows["g6f.large"]["price_change_per_hour"] is None
    assert rows["g6f.4xlarge"]["target"] == "type:g6f.4xlarge"
    assert rows["g6f.4xlarge"]["vgpu_profile"] == "NVIDIA L4-12Q" and rows["g6f.4xlarge"]["framebuffer_mib"] == 12288
    assert set(rows["g6.xlarge"]) >= {"vcpus", "memory_gib", "spot_price_per_hour", "price_source", "family"}
    assert doc["interrupted_resize"] is None and cloud["catalog_read"] == "2026-12-04"

    assert main(["slices", "l4box"]) == 0
    table = capsys.readouterr().out
    (current,) = [line for line in table.splitlines() if line.startswith("  * ")]
    assert "g6f.2xlarge" in current and "now" in current
    assert any("g6f.4xlarge" in line and "+$0.4" in line for line in table.splitlines())


def test_the_hosts_own_slice_price_wins_over_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    _add(capsys, "l4box", "--region", "us-east-2", "--instance-type", "type:g6f.2xlarge",
         "--price-per-hour", "0.50", "--slice-price", "g6f.large=0.21", "--slice-price", "type:g6.xlarge=0.70")
    cloud = _slices(capsys, "l4box")["cloud"]
    rows = {r["type"]: r for r in cloud["types"]}
    assert cloud["price_per_hour_now"] == 0.5 and cloud["price_now_source"] == "profile"
    assert (rows["g6f.large"]["price_per_hour"], rows["g6f.large"]["price_source"]) == (0.21, "override")
    assert rows["g6f.large"]["price_change_per_hour"] == pytest.approx(-0.29)
    assert (rows["g6.xlarge"]["price_per_hour"], rows["g6.xlarge"]["price_source"]) == (0.70, "override")
    assert rows["g6f.4xlarge"]["price_source"] == "catalog"


def test_catalog_dollars_are_never_shown_as_another_currency(capsys: pytest.CaptureFixture[str]) -> None:
    _add(capsys, "l4box", "--region", "us-east-1", "--instance-type", "g6.xlarge")
    assert main(["hosts", "edit", "l4box", "--currency", "EUR", "--slice-price", "g6f.4xlarge=0.80"]) == 0
    capsys.readouterr()
    cloud = _slices(capsys, "l4box")["cloud"]
    rows = {r["type"]: r for r in cloud["types"]}
    assert cloud["currency"] == "EUR" and cloud["catalog_prices_used"] is False
    assert rows["g6.xlarge"]["price_per_hour"] is None  # $0.8048 in the catalog: not euros
    assert rows["g6f.4xlarge"]["price_per_hour"] == 0.80 and rows["g6.xlarge"]["spot_price_per_hour"] is None
    assert main(["slices", "l4box"]) == 0
    assert "priced in EUR" in capsys.readouterr().out


def test_an_azure_host_without_a_preset_finds_its_family_by_type_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hosts", "add", "nva10", "--host", "203.0.113.10", "--provider", "custom", "--currency", "USD",
                 "--instance-type", "Standard_NV12ads_A10_v5"]) == 0
    capsys.readouterr()
    cloud = _slices(capsys, "nva10")["cloud"]
    assert cloud["provider"] == "azure" and cloud["card"] == "A10"
    assert [r["fraction"] for r in cloud["types"]] == ["1/6", "1/3", "1/2", "full"]


def test_the_instance_type_is_set_and_cleared_with_hosts_edit(capsys: pytest.CaptureFixture[str]) -> None:
    _add(capsys, "l4box", "--region", "us-east-1")
    assert cloud_family_of("l4box") is None  # no type yet: `slices` reads the GPUs as before
    assert main(["hosts", "edit", "l4box", "--instance-type", "g6f.large"]) == 0
    assert ProfileStore().get("l4box").slice_profile == "g6f.large"
    found = cloud_family_of("l4box")
    assert found is not None and found[1].current_type == "g6f.large"
    assert main(["hosts", "edit", "l4box", "--instance-type", ""]) == 0
    assert ProfileStore().get("l4box").slice_profile is None
    assert cloud_family_of("l4box") is None
    assert main(["hosts", "edit", "l4box", "--instance-type", "p5;rm -rf /"]) == 2
