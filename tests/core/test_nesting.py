"""Depth-bounded YAML and TOML readers (issue 36): a file nested hundreds deep is refused with exit
status 2 naming the line, never a RecursionError traceback; real files still read."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core.nesting import MAX_NESTING, NestingTooDeep, check_toml_nesting, check_yaml_nesting, load_toml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NVIDIA_CONFIG = FIXTURES / "mig-parted" / "config-default.yaml"


@pytest.mark.parametrize("verb", ["apply", "assert"])
@pytest.mark.parametrize(("name", "text", "line"), [
    ("flow", "version: v1\nmig-configs: " + "[" * 500 + "]" * 500 + "\n", 2),
    ("block", "version: v1\nmig-configs:\n  x:\n    - " + "- " * 3000 + "1\n", 4),
    ("mapping", "version: v1\nmig-configs: " + "{a: " * 500 + "1" + "}" * 500 + "\n", 2),
])
def test_a_deeply_nested_mig_parted_file_is_refused_naming_the_line(
    verb: str, name: str, text: str, line: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: 500 `[` gave a 2,986-line RecursionError traceback from apply and assert."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    code = main(["mig-parted", verb, "demo", str(path), "--config", "x"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == f"gpuws: error: {path}: mig-parted config, line {line}: nested more than {MAX_NESTING} levels " \
                  "deep; not read\n"


def test_nvidia_config_default_is_within_the_bound() -> None:
    check_yaml_nesting(NVIDIA_CONFIG.read_text())
    from gpuws.core.resize.migparted import import_mig_parted

    assert "all-1g.10gb" in import_mig_parted(NVIDIA_CONFIG.read_text())


def test_yaml_at_the_bound_is_read_and_one_past_it_is_not() -> None:
    check_yaml_nesting("x: " + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1))  # with the top mapping: 64
    with pytest.raises(NestingTooDeep):
        check_yaml_nesting("x: " + "[" * MAX_NESTING + "]" * MAX_NESTING)


@pytest.mark.parametrize(("text", "line"), [
    ("a = 1\nb = " + "[" * 5000 + "]" * 5000 + "\n", 2),
    ("[hosts]\nx = 1\n\nc = " + "{d = " * 1000 + "1" + "}" * 1000 + "\n", 4),
    ("e = [\n" + "[\n" * 1000 + "]\n" * 1001, 65),
])
def test_deep_toml_is_refused_naming_the_line_without_recursion(text: str, line: int) -> None:
    with pytest.raises(RecursionError):  # what tomllib alone does with it
        tomllib.loads(text)
    with pytest.raises(NestingTooDeep) as refused:
        load_toml(text)
    assert refused.value.line == line
    assert str(refused.value) == f"line {line}: nested more than {MAX_NESTING} levels deep; not read"


def test_brackets_in_strings_comments_and_headers_do_not_count() -> None:
    deep = "[" * 200
    text = (f'[[hosts]]\nname = "{deep}"\nnotes = \'{deep}\'\n# {deep}\n'
            f'long = """\n{deep}\n"""\nlit = \'\'\'{deep}\'\'\'\nesc = "\\"{deep}"\n'
            '[hosts.alerts]\nlist = [[1, 2], {a = [3]}]\n[[hosts]]\nname = "b"\n')
    check_toml_nesting(text)
    assert load_toml(text) == tomllib.loads(text)


def test_a_real_profiles_file_reads_the_same() -> None:
    text = ('schema_version = 1\n\n[[hosts]]\nname = "a100"\nhost = "203.0.113.7"\nport = 22\n'
            'tags = ["x", "y"]\nslice_prices = { "1g.10gb" = 0.5, full = 1.8 }\n'
            '[hosts.provider]\nkind = "aws"\ncommands = { start = ["aws", "ec2", "start-instances"] }\n')
    assert load_toml(text) == tomllib.loads(text)
