"""The add-host dialog's "Test connection": connect with the typed settings, report, disconnect.

Nothing is saved and no host key is trusted: an unknown key is reported as such (it is reviewed
when the host is connected for real). Errors are the connection's typed errors, shown by message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.ui.bridge import AsyncBridge


def connection_tester(bridge: AsyncBridge, **stores: Any) -> Callable[
        [HostProfile, str | None, Callable[[str | None], None]], None]:
    """A `ConnectionTester` for `HostDialog`; `stores` (secrets=, profiles=) reach jump hosts and keys."""

    def test(profile: HostProfile, secret: str | None, done: Callable[[str | None], None]) -> None:
        from gpuws.app.hostio import HostConnection

        async def attempt() -> None:
            connection = HostConnection(profile, password=secret, connect_timeout=10.0, **stores)
            try:
                await connection.connect()
            finally:
                await connection.close()

        def failed(exc: BaseException) -> None:
            done(str(exc) if isinstance(exc, GpuwsError) else f"{type(exc).__name__}: {exc}")

        bridge.run_async(attempt(), lambda _r: done(None), failed)

    return test
