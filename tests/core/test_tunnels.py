"""Tunnel presets, ports, URLs (token kept out of what is shown) and Jupyter's server list."""

from __future__ import annotations

import pytest

from gpuws.core.errors import GpuwsError, ValidationError
from gpuws.core.tunnels import (
    JupyterServer,
    LocalPortBusy,
    Preset,
    RemoteServiceDown,
    TunnelSpec,
    parse_jupyter_list,
    parse_preset,
    redact_url,
    spec_for,
    tunnel_url,
    vnc_port,
    vnc_viewer_argv,
)


def test_presets_give_the_usual_ports_and_urls() -> None:
    assert spec_for("jupyter").remote_port == 8888
    assert spec_for("tensorboard").remote_port == 6006
    assert spec_for("vnc").remote_port == 5901 and vnc_port(3) == 5903
    assert spec_for("dcv").remote_port == 8443
    assert spec_for("novnc").remote_port == 6080
    assert spec_for("tensorboard", 7007, 9000) == TunnelSpec(7007, 9000, Preset.TENSORBOARD)
    assert tunnel_url(spec_for("dcv"), 18443) == "https://127.0.0.1:18443/"
    assert tunnel_url(spec_for("novnc"), 6080) == "http://127.0.0.1:6080/vnc.html"
    assert tunnel_url(spec_for("vnc"), 5999) == "vnc://127.0.0.1:5999"
    assert not spec_for("vnc").info.opens_in_browser and spec_for("jupyter").info.opens_in_browser


def test_bad_choices_are_clear_errors() -> None:
    with pytest.raises(ValidationError, match="remote: give the remote port"):
        spec_for(None)
    with pytest.raises(ValidationError, match="unknown preset 'rdp'"):
        parse_preset("rdp")
    for bad in (0, 70000, -1):
        with pytest.raises(ValidationError, match="is not a TCP port"):
            TunnelSpec(remote_port=bad)
    with pytest.raises(ValidationError, match="local"):
        TunnelSpec(remote_port=80, local_port=99999)
    with pytest.raises(ValidationError, match="remote_host"):
        TunnelSpec(remote_port=80, remote_host="-oProxyCommand=x")
    with pytest.raises(ValidationError):
        vnc_port(100)


def test_local_port_choice() -> None:
    assert TunnelSpec(8888).local_port_candidates() == [8888, 0]  # same number if free, else any
    assert TunnelSpec(8888, 9999).local_port_candidates() == [9999]  # explicit: that or an error


def test_error_messages_read_as_one_line() -> None:
    busy = LocalPortBusy(8888)
    assert str(busy) == "local port 8888 is in use by another program; choose another or leave --local empty"
    assert isinstance(busy, GpuwsError)
    assert str(RemoteServiceDown("gpu1.example", 6006)) == "nothing is listening on gpu1.example:6006"


def test_jupyter_url_has_the_token_and_the_shown_url_does_not() -> None:
    server = JupyterServer(port=8890, token="abc123secret", base_url="/user/me")
    url = server.url(18890)
    assert url == "http://127.0.0.1:18890/user/me/?token=abc123secret"
    shown = redact_url(url)
    assert shown == "http://127.0.0.1:18890/user/me/?token=***"
    assert "abc123secret" not in repr(server) and "abc123secret" not in shown
    assert redact_url("http://127.0.0.1:1/?a=1&password=p") == "http://127.0.0.1:1/?a=1&password=***"
    assert redact_url("http://127.0.0.1:1/") == "http://127.0.0.1:1/"


def test_parse_jupyter_server_list() -> None:
    # As `jupyter server list --json` prints it (jupyter_server 2.x), with noise around it.
    text = "\n".join([
        "[W 2024-05-01 10:00:00 ServerApp] a warning",
        '{"base_url": "/", "hostname": "localhost", "password": false, "pid": 4242, "port": 8888, '
        '"root_dir": "/home/me", "secure": false, "sock": "", "token": "t0k", "url": "http://localhost:8888/", '
        '"version": "2.14.0"}',
        '{"base_url": "/", "notebook_dir": "/data", "pid": 77, "port": 8889, "token": ""}',
        '{"port": "nope"}',
        "{not json",
        "[1, 2]",
    ])
    servers = parse_jupyter_list(text)
    assert [(s.port, s.token, s.root_dir, s.pid) for s in servers] == [
        (8888, "t0k", "/home/me", 4242),
        (8889, "", "/data", 77),
    ]
    assert parse_jupyter_list("") == []


def test_vnc_viewer_is_found_or_none() -> None:
    installed = {"xtigervncviewer": "/usr/bin/xtigervncviewer"}
    assert vnc_viewer_argv(5999, installed.get) == ["/usr/bin/xtigervncviewer", "127.0.0.1::5999"]
    assert vnc_viewer_argv(5999, {"remmina": "/usr/bin/remmina"}.get) == [
        "/usr/bin/remmina", "-c", "vnc://127.0.0.1:5999"]
    assert vnc_viewer_argv(5999, {}.get) is None
