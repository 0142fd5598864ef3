"""The XID table and the kernel-log parser, on real kernel-log lines (tests/fixtures/real/kernel-log)."""

from __future__ import annotations

from pathlib import Path

from gpuws.core.xid import XidClass, parse_xid_lines, xid_info

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kernel-log"


def test_real_dmesg_lines_give_codes_bus_ids_and_classes() -> None:
    events = parse_xid_lines((LOGS / "dmesg-xid-13-109__gpud.txt").read_text())
    assert [e.code for e in events] == [13, 13, 13, 109]
    assert all(e.pci == "0000:cb:00" for e in events)
    assert events[0].matches_bus_id("00000000:CB:00.0")
    assert not events[0].matches_bus_id("00000000:CA:00.0")
    assert {e.info.xid_class for e in events} == {XidClass.APPLICATION}
    assert "Illegal Instruction Parameter" in events[0].message


def test_fallen_off_the_bus_is_a_hardware_failure() -> None:
    events = parse_xid_lines((LOGS / "journal-xid-79__nvsentinel.txt").read_text())
    assert [(e.code, e.pci) for e in events] == [(79, "0000:44:00")]
    assert events[0].info.xid_class is XidClass.HARDWARE_FAIL


def test_classes_of_the_issue_and_unknown_codes() -> None:
    for code in (48, 64, 79, 95, 119, 120):
        assert xid_info(code).xid_class is XidClass.HARDWARE_FAIL, code
    for code in (63, 74, 92, 94):
        assert xid_info(code).xid_class is XidClass.HARDWARE_DEGRADE, code
    for code in (13, 31, 43, 45):
        assert xid_info(code).xid_class is XidClass.APPLICATION, code
    assert xid_info(9999).xid_class is XidClass.UNCLASSIFIED


def test_lines_that_only_look_alike_are_not_xids() -> None:
    assert parse_xid_lines("NVRM: Xid is mentioned\nkernel: Xid (PCI:0000:01:00): 13\nnothing") == []
