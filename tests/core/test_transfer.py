"""What a copy decides with no network (skip, resume, unsafe names) and its progress event and meter."""

from __future__ import annotations

import json

import pytest

from gpuws.core.transfer import (
    Action,
    EntryKind,
    EntryState,
    ProgressMeter,
    TransferProgress,
    decide,
    eta_text,
    rate_text,
    shown_path,
    unsafe_name,
)


def test_skip_resume_or_copy() -> None:
    src = EntryState(EntryKind.FILE, size=100, mtime=1000)
    assert decide(src, None) == (Action.COPY, 0)
    assert decide(src, EntryState(EntryKind.FILE, 100, 1000)) == (Action.SKIP, 100)
    assert decide(src, EntryState(EntryKind.FILE, 100, 999)) == (Action.COPY, 0)  # same size, other time
    assert decide(src, EntryState(EntryKind.FILE, 40, 5)) == (Action.RESUME, 40)  # a prefix
    assert decide(src, EntryState(EntryKind.FILE, 40, 5), resume=False) == (Action.COPY, 0)
    assert decide(src, EntryState(EntryKind.FILE, 140, 1000)) == (Action.COPY, 0)  # longer: no prefix
    assert decide(src, EntryState(EntryKind.SYMLINK, 100, 1000)) == (Action.COPY, 0)
    assert decide(src, EntryState(EntryKind.FILE, 100, 5), same_content=True) == (Action.SKIP, 100)
    assert decide(src, EntryState(EntryKind.FILE, 100, 1000), same_content=False) == (Action.COPY, 0)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../etc", "a\0b"])
def test_names_a_hostile_listing_could_hold_are_refused(name: str) -> None:
    assert unsafe_name(name) is not None


def test_names_with_newlines_are_kept_and_shown_escaped_on_one_line() -> None:
    assert unsafe_name("two\nlines") is None and unsafe_name("..hidden") is None
    assert shown_path("/data/two\nlines") == "/data/two\\nlines"
    long = "/d/" + "x" * 4096
    shown = shown_path(long)
    assert len(shown) < 200 and "\u2026" in shown and "(4099 bytes)" in shown


def test_meter_rate_and_eta_count_only_bytes_sent_now() -> None:
    now = [0.0]
    events: list[TransferProgress] = []
    meter = ProgressMeter(events.append, total=1000, file_count=2, already=100, clock=lambda: now[0])
    now[0] = 1.0
    meter.start_file("a", 500, 300)  # a resumed prefix of 300: done, but not part of the rate
    assert events[-1].done == 400 and events[-1].rate == 0 and events[-1].eta is None
    now[0] = 2.0
    meter.advance(200)
    event = events[-1]
    assert (event.done, event.file_done, event.file_index, event.file_count) == (600, 500, 1, 2)
    assert event.rate == pytest.approx(100.0) and event.eta == pytest.approx(4.0)
    assert json.loads(json.dumps(event.to_dict()))["event"] == "progress"
    assert rate_text(118e6) == "118 MB/s" and eta_text(65) == "1:05" and eta_text(None) == "--:--"


def test_the_cli_prints_progress_only_after_a_second_and_json_lines_with_json(
    capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuws.cli.commands.session import CopyProgressLine

    now = [0.0]
    event = TransferProgress("a.bin", 1, 1, 5, 10, 5, 10, 0.5, 10.0, 0.5)
    line = CopyProgressLine(json_lines=True, bar=False, clock=lambda: now[0])
    line(event)
    assert capsys.readouterr().out == ""  # a copy shorter than a second prints nothing
    now[0] = 1.5
    line(event)
    assert json.loads(capsys.readouterr().out)["done"] == 5
    bar = CopyProgressLine(json_lines=False, bar=True, clock=lambda: now[0])
    now[0] = 3.0
    bar(event)
    bar.finish()
    err = capsys.readouterr().err
    assert "50.0%" in err and "10 B/s" in err and err.endswith("\n")
