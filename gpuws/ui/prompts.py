"""What a login prompt says: which host asks, as whom, and why (never a bare "Password:" box)."""

from __future__ import annotations

from gpuws.core.models import HostProfile


def login_prompt_text(profile: HostProfile | None, name: str, title: str, instructions: str,
                      prompt: str) -> tuple[str, str]:
    """(window title, label) for one keyboard-interactive prompt from host `name`.

    The server's own title, instructions and prompt are remote text: they are shown, as plain
    text, under a first line gpuws writes itself, so a server cannot pretend to be another host.
    """
    where = name
    if profile is not None:
        user = f"{profile.user}@" if profile.user else ""
        where = f"{name} ({user}{profile.host})"
    lines = [f"{where} asks you to sign in."]
    if title.strip():
        lines.append(title.strip())
    if instructions.strip():
        lines.append(instructions.strip())
    lines.append(prompt.strip() or "Password:")
    return f"Sign in to {name}", "\n".join(lines)
