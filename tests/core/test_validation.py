"""Field validation: hostile values are refused with the field named; good values pass normalised."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.core.errors import ValidationError
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.validation import (
    validate_host,
    validate_key_path,
    validate_name,
    validate_port,
    validate_price,
    validate_profile,
    validate_user,
)

# Values an attacker (or a careless paste) might put in any field.
HOSTILE = [
    "-oProxyCommand=x",
    "a b",
    "h;rm -rf /",
    "$(id)",
    "`id`",
    "host\nname",
    "x" * 300,
    "user@host",
    "host%eth0",
    "a|b",
    "a&b",
    "a>b",
    "'quoted'",
    "tab\there",
    "",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_hosts_are_refused_naming_the_field(value: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate_host(value)
    assert err.value.field == "host"
    assert "\n" not in str(err.value)  # one line, even for a value with a newline in it


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_users_are_refused(value: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate_user(value)
    assert err.value.field == "user"


@pytest.mark.parametrize("value", [*HOSTILE, "x" * 65, "..", ".", "a:b", "a/b", "é"])
def test_hostile_names_are_refused(value: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate_name(value)
    assert err.value.field == "name"


def test_a_very_long_value_is_not_echoed_in_full() -> None:
    with pytest.raises(ValidationError) as err:
        validate_host("a;" * 5000)
    assert len(str(err.value)) < 300


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("gpu-1.example.com", "gpu-1.example.com"),
        ("example.com.", "example.com."),
        ("localhost", "localhost"),
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8::1", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("::1", "::1"),
        ("[::ffff:10.0.0.1]", "::ffff:a00:1"),
    ],
)
def test_dns_names_and_addresses_are_accepted(given: str, stored: str) -> None:
    assert validate_host(given) == stored


@pytest.mark.parametrize("value", ["999.1.1.1", "1234", "10.1", "[not-v6]", "fe80::1%eth0", "-host", "a..b", "-a.b"])
def test_lookalike_addresses_are_refused(value: str) -> None:
    with pytest.raises(ValidationError):
        validate_host(value)


@pytest.mark.parametrize("value", ["ubuntu", "ec2-user", "_svc", "a.b", "root"])
def test_login_names_are_accepted(value: str) -> None:
    assert validate_user(value) == value


def test_no_user_means_the_ssh_default() -> None:
    assert validate_user(None) is None


@pytest.mark.parametrize(("given", "port"), [(1, 1), (22, 22), (65535, 65535), ("2222", 2222)])
def test_ports_in_range_are_accepted(given: object, port: int) -> None:
    assert validate_port(given) == port


@pytest.mark.parametrize("value", [0, 65536, -1, "22x", "", True, 22.5, "٢٢", None])
def test_ports_out_of_range_or_not_numbers_are_refused(value: object) -> None:
    with pytest.raises(ValidationError) as err:
        validate_port(value)
    assert err.value.field == "port"


def test_price_must_be_a_non_negative_number() -> None:
    assert validate_price("2.50") == 2.5
    assert validate_price(0) == 0.0
    for bad in (-0.01, "abc", float("nan"), float("inf"), True):
        with pytest.raises(ValidationError) as err:
            validate_price(bad)
        assert err.value.field == "price_per_hour"


def test_key_file_must_exist_and_be_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = tmp_path / "id_test"
    key.write_text("key")
    assert validate_key_path(str(key)) == str(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert validate_key_path("~/id_test") == "~/id_test"
    with pytest.raises(ValidationError, match="no such file"):
        validate_key_path(str(tmp_path / "missing"))
    with pytest.raises(ValidationError, match="absolute"):
        validate_key_path("id_test")
    with pytest.raises(ValidationError):
        validate_key_path(str(tmp_path))  # a directory is not a key file
    assert validate_key_path(str(tmp_path / "missing"), must_exist=False) is not None


def test_auth_key_needs_a_key_file() -> None:
    with pytest.raises(ValidationError) as err:
        validate_profile(HostProfile(name="a", host="h", auth=AuthMethod.KEY))
    assert err.value.field == "key_path"


def test_jump_must_name_another_existing_profile() -> None:
    known = {"bastion": HostProfile(name="bastion", host="b.example")}
    assert validate_profile(HostProfile(name="gpu", host="g", jump="bastion"), known).jump == "bastion"
    with pytest.raises(ValidationError, match="no host profile named") as err:
        validate_profile(HostProfile(name="gpu", host="g", jump="nowhere"), known)
    assert err.value.field == "jump"
    with pytest.raises(ValidationError, match="own jump host"):
        validate_profile(HostProfile(name="gpu", host="g", jump="gpu"), known)


def test_jump_cycles_through_the_store_are_refused() -> None:
    known = {
        "a": HostProfile(name="a", host="a.example", jump="b"),
        "b": HostProfile(name="b", host="b.example", jump="c"),
    }
    # c -> a -> b -> c loops back.
    with pytest.raises(ValidationError, match="cycle: c -> a -> b -> c"):
        validate_profile(HostProfile(name="c", host="c.example", jump="a"), known)


def test_validate_profile_normalises_and_checks_nested_fields() -> None:
    profile = validate_profile(HostProfile(name="v6", host="[::1]", port="2200", tags=["a100"]))  # type: ignore[arg-type]
    assert (profile.host, profile.port) == ("::1", 2200)
    with pytest.raises(ValidationError) as err:
        validate_profile(HostProfile(name="t", host="h", tags=["bad tag"]))
    assert err.value.field == "tags"
    bad_provider = HostProfile(name="p", host="h")
    bad_provider.provider.instance_id = "-i-123"
    with pytest.raises(ValidationError) as err:
        validate_profile(bad_provider)
    assert err.value.field == "provider.instance_id"
    with pytest.raises(ValidationError) as err:
        validate_profile(HostProfile(name="s", host="h", slice_prices={"1g.10gb": -1.0}))
    assert err.value.field == "slice_prices.1g.10gb"


@pytest.mark.parametrize("value", ["full", "7x1g.10gb", "3g.40gb,2g.20gb", "gpu0=full;gpu1=1g.10gb", "1/4"])
def test_slice_profiles_accept_layouts(value: str) -> None:
    from gpuws.core.validation import validate_slice_profile

    assert validate_slice_profile(value) == value


@pytest.mark.parametrize("value", ["-x", "a b", "$(id)", "a`b`", "x\n", "x" * 300])
def test_slice_profiles_refuse_the_rest(value: str) -> None:
    from gpuws.core.validation import validate_slice_profile

    with pytest.raises(ValidationError, match="slice_profile"):
        validate_slice_profile(value)
