"""The add-host dialog's "Test connection": connect with the typed settings, report, disconnect.

Nothing is saved and no host key is trusted: an unknown key is reported as such (it is reviewed
when the host is connected for real). Errors are the connection's typed errors, shown by message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.ui.bridge import AsyncBridge

if TYPE_CHECKING:
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.secrets import SecretStore


def connection_tester(bridge: AsyncBridge, *, secrets: SecretStore | None = None,
                      profiles: ProfileStore | None = None) -> Callable[
        [HostProfile, str | None, Callable[[str | None], None]], None]:
    """A `ConnectionTester` for `HostDialog`; `secrets` and `profiles` reach jump hosts and keys."""

    def test(profile: HostProfile, secret: str | None, done: Callable[[str | None], None]) -> None:
        """Connect with `profile` and `secret`, then call `done(None)` or `done(reason)`."""
        from gpuws.app.hostio import HostConnection

        async def attempt() -> None:
            """Connect, then disconnect."""
            connection = HostConnection(profile, password=secret, connect_timeout=10.0, secrets=secrets,
                                        profiles=profiles)
            try:
                await connection.connect()
            finally:
                await connection.close()

        def failed(exc: BaseException) -> None:
            """Report the reason."""
            done(str(exc) if isinstance(exc, GpuwsError) else f"{type(exc).__name__}: {exc}")

        bridge.run_async(attempt(), lambda _r: done(None), failed)

    return test
