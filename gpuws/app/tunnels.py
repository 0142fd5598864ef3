"""The one tunnel opener: both `gpuws tunnel` and the window's Session tab open tunnels here.

For Jupyter without a port it finds the running server (or starts one) and its token; for
TensorBoard it starts `tensorboard --logdir` on the host when asked to (`logdir`), or when
nothing answers on the port (with the login directory as the log directory), unless `start` is
off. A service that does not answer leaves the tunnel open for when it starts: its
`last_error` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuws.core.errors import GpuwsError
from gpuws.core.tunnels import PRESETS, Preset, RemoteServiceDown, spec_for

if TYPE_CHECKING:
    # Re-exported: the window names the tunnels it is given without importing gpuws.remote.
    from gpuws.remote.connection import HostConnection
    from gpuws.remote.tunnels import Tunnel as Tunnel

DEFAULT_TENSORBOARD_LOGDIR = "~"  # when none is named: TensorBoard looks for runs below it
TENSORBOARD_PORT = 6006


@dataclass(frozen=True)
class TunnelRequest:
    """What to forward: a preset (or a custom port), the ports, and whether to start the service."""

    preset: Preset = Preset.CUSTOM
    remote: int | None = None  # None: the preset's port (Jupyter: the running server's)
    local: int | None = None  # None: the same as remote if free, else any free port
    start: bool = True  # start Jupyter / TensorBoard when none runs
    logdir: str | None = None  # TensorBoard: start it on this log directory first

    def check(self) -> None:
        """Refuse bad input before going to the host (ValidationError)."""
        if self.preset is not Preset.JUPYTER or self.remote is not None:
            spec_for(self.preset, self.remote or self._default_remote(), self.local)

    def _default_remote(self) -> int | None:
        return TENSORBOARD_PORT if self.preset is Preset.TENSORBOARD and self.remote is None else self.remote


async def _find_or_start(connection: HostConnection, request: TunnelRequest) -> tuple[int | None, str | None, bool]:
    """The service `request` names on the host: (its port, its token, whether it was started now)."""
    from gpuws.remote.jupyter import find_or_start, start_tensorboard

    token = None
    fresh = False
    remote = request.remote
    if request.preset is Preset.JUPYTER and remote is None:
        server, fresh = await find_or_start(connection.runner, start=request.start)
        token, remote = server.token or None, server.port
    elif request.preset is Preset.TENSORBOARD:
        remote = remote or TENSORBOARD_PORT
        if request.logdir:
            await start_tensorboard(connection.runner, request.logdir, remote)
            fresh = True
    return remote, token, fresh


async def open_tunnel(connection: Any, request: TunnelRequest, **tunnel_options: Any) -> Tunnel:
    """Open a `Tunnel` over `connection` as `request` says, starting the service if needed; a
    service that does not answer leaves `tunnel.last_error` set (the tunnel stays open)."""
    from gpuws.remote.tunnels import Tunnel

    remote, token, fresh = await _find_or_start(connection, request)
    tunnel = Tunnel(connection, spec_for(request.preset, remote, request.local), token=token, **tunnel_options)
    await tunnel.open()
    await _until_it_answers(connection, tunnel, request, remote, fresh)
    return tunnel


async def bring_back(connection: HostConnection, tunnel: Tunnel, request: TunnelRequest) -> str:
    """After the host came back: "open" again when its host side answers; when nothing does and
    gpuws finds or starts this service (Jupyter; TensorBoard), it does so again, as on first open,
    points the tunnel at it (same local port) and returns what it did, in words."""
    try:
        await tunnel.probe()
        return ""
    except RemoteServiceDown:
        if not _finds_or_starts(request):
            raise
    remote, token, fresh = await _find_or_start(connection, request)
    if remote is None:
        return ""
    tunnel.retarget(remote, token)
    started = await _until_it_answers(connection, tunnel, request, remote, fresh)
    if tunnel.last_error:
        return ""
    what = PRESETS[request.preset].label
    return f"{what} {'started' if fresh or started else 'found'} again after the host came back"


def _finds_or_starts(request: TunnelRequest) -> bool:
    """Whether opening `request` finds or starts its server (so a return of the host does too)."""
    return request.start and (
        (request.preset is Preset.JUPYTER and request.remote is None) or request.preset is Preset.TENSORBOARD)


async def _until_it_answers(connection: HostConnection, tunnel: Tunnel, request: TunnelRequest, remote: int | None,
                            fresh: bool) -> bool:
    """Wait for a server just started, or check one found; TensorBoard is started when none answers
    (True: it was started here)."""
    from gpuws.remote.jupyter import start_tensorboard

    try:
        try:
            await (tunnel.wait_ready(60) if fresh else tunnel.probe())
        except RemoteServiceDown:
            if request.preset is not Preset.TENSORBOARD or fresh or not request.start:
                raise
            # No TensorBoard answers on the port: start one (as `--logdir` would), then wait for it.
            assert remote is not None
            await start_tensorboard(connection.runner, DEFAULT_TENSORBOARD_LOGDIR, remote)
            await tunnel.wait_ready(60)
            return True
    except (RemoteServiceDown, GpuwsError) as exc:
        tunnel.last_error = str(exc)  # shown with the tunnel; it stays for when the service starts
    return False
