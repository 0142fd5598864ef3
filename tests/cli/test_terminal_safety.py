"""Strings from a host or a profile reach the terminal printable: control, bidi and zero-width
characters escaped, one line per value (issue 13)."""

from __future__ import annotations

import pytest

from gpuws.cli.commands.probe import format_inventory
from gpuws.cli.main import main
from gpuws.core.inventory import GpuInfo, HostFacts, Inventory
from gpuws.core.terminal import printable

HOSTILE = "A100\n9  FAKE-GPU  80 GiB\x1b[2J\x1b]0;owned\x07\u202eevil\u200b\u2066x\u2069\r\t"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", "plain"),
        ("a\nb", "a\\nb"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("\u202eabc", "\\u202eabc"),
        ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
        ("\u2028\u2029", "\\u2028\\u2029"),
        ("bad byte \udcff", "bad byte \\xff"),
        ("caf\u00e9 \u6f22\u5b57", "caf\u00e9 \u6f22\u5b57"),  # printable non-ASCII is kept as is
    ],
)
def test_printable_escapes_what_a_terminal_would_interpret(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_is_one_visible_line_and_can_be_bounded() -> None:
    out = printable(HOSTILE)
    assert out.isprintable() and "\n" not in out
    assert printable("x" * 50, max_length=10) == "x" * 9 + "\u2026"


def test_probe_table_shows_a_hostile_gpu_name_on_one_line() -> None:
    gpu = GpuInfo(index=0, name=HOSTILE, uuid=HOSTILE, pci_bus_id=None, memory_total_mib=81920,
                  driver_version="550\n1 fake", cuda_version=None)
    text = format_inventory("rig", Inventory(HostFacts(hostname="h\x1b[2J", os="\u202elinux"), [gpu]))
    lines = text.splitlines()
    assert len(lines) == 4  # host line, tools line, header, one GPU row: nothing injected
    assert all(line.isprintable() for line in lines)
    assert "\\x1b[2J" in lines[0] and "\\u202e" in lines[0]


def test_hosts_show_and_list_print_profile_notes_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hosts", "add", "rig", "--host", "rig.example", "--notes", "line1\n\x1b[31mred\u202e",
                 "--tag", "t"]) == 0
    capsys.readouterr()
    assert main(["hosts", "show", "rig"]) == 0
    out = capsys.readouterr().out
    (notes,) = [line for line in out.splitlines() if line.startswith("notes:")]
    assert notes.endswith("line1\\n\\x1b[31mred\\u202e")
    assert all(line.isprintable() for line in out.splitlines())
    assert main(["hosts", "list"]) == 0
    assert all(line.isprintable() for line in capsys.readouterr().out.splitlines())


def test_error_messages_are_one_printable_line(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuws.cli.output import fail

    assert fail("no such host 'a\nb\x1b[31m'", 1) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip("\n").isprintable()
