"""The host list: profiles, one HostSession per host, the demo host, host keys and login prompts.

All disk and keyring work goes through `AsyncBridge.run_blocking` and all remote work through
`HostSession`, so the GUI thread only ever updates widgets.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QInputDialog, QLineEdit

from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile, SecretKind
from gpuws.core.profiles import BulkAddResult
from gpuws.ui.bridge import ask_on_gui_thread
from gpuws.ui.demo import DEMO_NAME, RunningDemo, start_demo
from gpuws.ui.hostkey_dialog import HostKeyChoice, HostKeyDialog
from gpuws.ui.session_controller import HostSession
from gpuws.ui.widgets import BannerKind
from gpuws.ui.window.base import WindowBase

if TYPE_CHECKING:
    from asyncssh import SSHKey

log = logging.getLogger("gpuws.ui.main_window")


class HostList(WindowBase):
    """The hosts the sidebar lists and their sessions; adding, saving, removing, the demo host."""

    # -- profiles -------------------------------------------------------------------------------

    def all_profiles(self) -> list[HostProfile]:
        """Saved profiles plus the in-memory demo host (if running), as the sidebar shows them."""
        extra = [self.demo.profile] if self.demo is not None else []
        return [*extra, *self.profiles]

    def current_profile(self) -> HostProfile | None:
        """The profile selected in the sidebar, if any."""
        name = self.sidebar.current_name()
        return next((p for p in self.all_profiles() if p.name == name), None)

    def reload_profiles(self) -> None:
        """Read the profile file off the GUI thread, then refresh the sidebar."""
        store = self.store

        def load() -> tuple[list[HostProfile], dict[Path, list[str]]]:
            """Read the profiles, and what is wrong in the profiles and fleets files."""
            from gpuws.core.fleet.profiles import FleetStore

            profiles = store.load()
            fleets = FleetStore()  # its problems show in the same banner (fleet view: `gpuws fleet list`)
            fleets.load()
            return profiles, {store.path: store.state.notices(), fleets.path: fleets.state.notices()}

        self.bridge.run_blocking(load, self._on_profiles_loaded, self._on_store_error, owner=self)

    def _on_profiles_loaded(self, result: tuple[list[HostProfile], dict[Path, list[str]]]) -> None:
        profiles, problems = result
        self.profiles = [p for p in profiles if not (self.demo and p.name == DEMO_NAME)]
        self.file_problems.show_problems(problems)
        # Read before syncing: filling the sidebar selects its first row, which is saved too.
        selected = str(self.settings.value("ui/selected", "")) if self._first_load else ""
        self._sync_sessions()
        if self._first_load:
            self._first_load = False
            if selected:
                self.sidebar.select(selected)
            if self.prefs.connect_on_start:
                for profile in self.profiles:
                    self.sessions[profile.name].connect_host()
        self.profiles_loaded.emit()

    def _sync_sessions(self) -> None:
        """One session per listed host: new hosts get one, removed or edited ones are replaced."""
        wanted = {p.name: p for p in self.all_profiles()}
        for name in list(self.sessions):
            session = self.sessions[name]
            if name not in wanted or (wanted[name] != session.profile and not session.profile.simulated):
                self._drop_session(name)
        for name, profile in wanted.items():
            if name not in self.sessions:
                self._add_session(HostSession(profile, self.bridge, parent=self))
        self.sidebar.set_profiles(self.all_profiles())
        for name, session in self.sessions.items():
            self.sidebar.set_state(name, session.state, session.detail)
            self.sidebar.set_inventory(name, session.inventory)
        self._show_empty_or_detail()

    def _add_session(self, session: HostSession) -> None:
        name = session.name
        self.sessions[name] = session
        # Every host streams telemetry and meters its cost while connected, shown or not.
        self.telemetry.watch_session(session)  # reported to the Workspace, which meters its cost
        session.kbdint_prompt = self._kbdint_prompt_for(name)
        session.state_changed.connect(lambda state, detail, n=name: self._on_session_state(n, state, detail))
        session.inventory_changed.connect(lambda inv, n=name: self.sidebar.set_inventory(n, inv))
        session.host_key_unknown.connect(lambda exc, n=name: self._on_unknown_key(n, exc))

    def _drop_session(self, name: str) -> None:
        session = self.sessions.pop(name)
        if self.detail.context is not None and self.detail.context.session is session:
            self.detail.set_host(None)
        session.close()
        session.deleteLater()

    def _on_session_state(self, name: str, state: str, detail: str) -> None:
        self.sidebar.set_state(name, state, detail)

    # -- host actions ---------------------------------------------------------------------------

    def retry_current(self) -> None:
        """Try to reach the shown host at once (it keeps trying by itself, slowly)."""
        profile = self.current_profile()
        if profile is not None:
            self.workspace.retry_now(profile.name)

    def reconnect_current(self) -> None:
        """A new connection for the shown host (Host > Reconnect)."""
        profile = self.current_profile()
        if profile is not None:
            self.workspace.reconnect(profile.name)

    def save_profile(
        self, profile: HostProfile, old_name: str | None, kind: SecretKind | None = None, secret: str | None = None
    ) -> None:
        """Add (old_name None) or update a profile, and put its secret in the keyring, off the GUI thread."""
        store = self.store
        secrets = self.secrets if secret is not None or old_name not in (None, profile.name) else None

        def save() -> str:
            """Write the profile and its secret; the name it was saved under."""
            if secrets is not None and secret is not None:
                secrets.ensure_usable()  # before writing: never a saved host whose password was dropped
            if old_name is None:
                stored = store.add(profile)
            else:
                stored = store.update(profile, old_name)
                if secrets is not None and old_name != profile.name:
                    secrets.move(old_name, profile.name)
            if secrets is not None and kind is not None and secret is not None:
                secrets.set(stored.name, kind, secret)
            return str(stored.name)

        def done(name: str) -> None:
            """Show the saved profile, selected."""
            self.reload_profiles()
            self.profiles_loaded.connect(self._select_after_load(name))
            self.profile_saved.emit(name)

        def failed(exc: BaseException) -> None:
            """Say why it was not saved."""
            self._on_store_error(exc)
            self.reload_profiles()  # whatever was written shows in the sidebar at once

        self.bridge.run_blocking(save, done, failed, owner=self)

    def _select_after_load(self, name: str) -> Callable[[], None]:
        def select() -> None:
            """Select the saved host once the list shows it (once)."""
            self.profiles_loaded.disconnect(select)
            self.sidebar.select(name)

        return select

    def remove_host(self, name: str) -> None:
        """Remove without asking (the confirmation already happened)."""
        if self.demo is not None and name == self.demo.profile.name:
            self._stop_demo()
            self._sync_sessions()
            return
        store, secrets = self.store, self.secrets

        def remove() -> None:
            """Remove the profile, then its secrets."""
            store.remove(name)
            try:
                secrets.clear_all(name)
            except GpuwsError as exc:  # the profile is gone; a keyring hiccup is only reported
                log.warning("could not clear the secrets of %s: %s", name, exc)

        self.bridge.run_blocking(remove, lambda _: self.reload_profiles(), self._on_store_error, owner=self)

    def _import_profiles(self, profiles: Sequence[HostProfile]) -> None:
        store = self.store

        def done(result: BulkAddResult) -> None:
            """Say which hosts were not imported, and show the rest."""
            rejected = list(result.rejected)
            if rejected:
                lines = "; ".join(f"{n}: {why}" for n, why in rejected)
                self.show_notice(f"Not imported: {lines}", BannerKind.WARNING)
            self.reload_profiles()

        self.bridge.run_blocking(lambda: store.add_many(list(profiles)), done, self._on_store_error, owner=self)

    # -- host keys and prompts ------------------------------------------------------------------

    def _on_unknown_key(self, name: str, exc: BaseException) -> None:
        if name == self.sidebar.current_name():
            self.review_host_key(name)

    def _review_current_key(self) -> None:
        self.review_host_key(self.sidebar.current_name())

    def review_host_key(self, name: str) -> HostKeyDialog | None:
        """Ask about the unknown key `name`'s last connect met; reconnect as the user decides."""
        session = self.sessions.get(name)
        if session is None or session.host_key_error is None:
            return None
        error = session.host_key_error
        dialog = HostKeyDialog.for_error(error, self)
        key = getattr(error, "key", None)
        if key is None:  # without the key itself only "remember" (accept-new) can trust it
            dialog.once_button.setEnabled(False)
            dialog.once_button.setToolTip("Not available for this host")

        def decided() -> None:
            """Connect as the user decided (trusting the key once, or for good)."""
            if dialog.choice is HostKeyChoice.ACCEPT_ONCE and key is not None:
                session.connect_host(known_host_key=key)
            elif dialog.choice is HostKeyChoice.ACCEPT_AND_REMEMBER:
                session.connect_host(accept_new=key is None, known_host_key=key)
                if key is not None:
                    self._remember_key(session.profile, key)

        dialog.finished.connect(lambda _r: decided())
        return self._open(dialog)

    def _remember_key(self, profile: HostProfile, key: SSHKey) -> None:
        def record() -> None:
            """Add the key to gpuws' known_hosts."""
            from gpuws.app.hostio import remember_host_key

            remember_host_key(profile.host, profile.port, key)

        self.bridge.run_blocking(record, None, self._on_store_error, owner=self)

    def _kbdint_prompt_for(self, name: str) -> Callable[[str, str, Sequence[tuple[str, bool]]],
                                                           Awaitable[list[str] | None]]:
        async def prompt(title: str, instructions: str, prompts: Sequence[tuple[str, bool]]) -> list[str] | None:
            """Ask the user on the GUI thread; None when they cancel."""
            return await ask_on_gui_thread(self.bridge, lambda: self._ask_prompts(name, title, instructions, prompts))

        return prompt

    def _ask_prompts(
        self, name: str, title: str, instructions: str, prompts: Sequence[tuple[str, bool]]
    ) -> list[str] | None:
        from gpuws.ui.prompts import login_prompt_text

        answers = []
        session = self.sessions.get(name)
        # Announce it: show the window on the asking host before the prompt appears (issue 16).
        self.sidebar.select(name)
        self._raise_window()
        for text, echo in prompts:
            mode = QLineEdit.EchoMode.Normal if echo else QLineEdit.EchoMode.Password
            window_title, label = login_prompt_text(session.profile if session else None, name, title,
                                                    instructions, text)
            value, ok = QInputDialog.getText(self, window_title, label, mode)
            if not ok:
                return None
            answers.append(value)
        return answers

    # -- demo -----------------------------------------------------------------------------------

    def open_demo(self) -> None:
        """Start the simulated host in-process, list it (not saved), select and connect it."""
        if self.demo is not None:
            self.sidebar.select(self.demo.profile.name)
            return
        self.demo_action.setEnabled(False)
        self.empty.demo_button.setEnabled(False)
        self._demo_starting = self.bridge.run_async(
            start_demo(), self._on_demo_started, self._on_demo_failed, owner=self
        )

    def _on_demo_started(self, demo: RunningDemo) -> None:
        self._demo_starting = None
        if self._closed:  # shutdown() already stopped this server
            return
        self.demo = demo
        self.profiles = [p for p in self.profiles if p.name != DEMO_NAME]  # the demo shadows a saved "demo"
        session = HostSession(
            demo.profile, self.bridge, password=demo.password, known_host_key=demo.known_host_key, parent=self
        )
        if DEMO_NAME in self.sessions:
            self._drop_session(DEMO_NAME)
        self._add_session(session)
        self._sync_sessions()
        self.sidebar.select(DEMO_NAME)
        session.connect_host()
        self.demo_ready.emit(DEMO_NAME)

    def _on_demo_failed(self, exc: BaseException) -> None:
        self.demo_action.setEnabled(True)
        self.empty.demo_button.setEnabled(True)
        self.show_notice(f"Could not start the demo host: {exc}")

    def _stop_demo(self) -> concurrent.futures.Future[None] | None:
        demo, self.demo = self.demo, None
        if demo is None:
            return None
        if DEMO_NAME in self.sessions:
            self._drop_session(DEMO_NAME)
        self.demo_action.setEnabled(True)
        self.empty.demo_button.setEnabled(True)
        return self.bridge.run_async(demo.server.stop()) if self.bridge.running else None

