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
from gpuws.core.tunnels import Preset, RemoteServiceDown, spec_for

if TYPE_CHECKING:
    # Re-exported: the window names the tunnels it is given without importing gpuws.remote.
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


async def open_tunnel(connection: Any, request: TunnelRequest, **tunnel_options: Any) -> Tunnel:
    """Open a `Tunnel` over `connection` as `request` says, starting the service if needed; a
    service that does not answer leaves `tunnel.last_error` set (the tunnel stays open)."""
    from gpuws.remote.jupyter import find_or_start, start_tensorboard
    from gpuws.remote.tunnels import Tunnel

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
    tunnel = Tunnel(connection, spec_for(request.preset, remote, request.local), token=token, **tunnel_options)
    await tunnel.open()
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
    except (RemoteServiceDown, GpuwsError) as exc:
        tunnel.last_error = str(exc)  # shown with the tunnel; it stays for when the service starts
    return tunnel
