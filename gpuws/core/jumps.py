"""Jump host chains, as OpenSSH's `ProxyJump` / `ssh -J` take them.

A profile's `jump` is either the name of another profile (the common case) or a comma-separated
chain whose hops are profile names or `[user@]host[:port]` / `ssh://[user@]host[:port]` addresses,
so a jump host needs no profile of its own. The hops are passed in order, outermost first. As with
`ssh -J a,b`, the first hop's own jump hosts are passed before it; the later hops are reached
through the earlier ones whatever their own profile says.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from gpuws.core.errors import GpuwsError, ValidationError
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.validation import MAX_JUMP_DEPTH, NAME_PATTERN

MAX_JUMP_HOPS = MAX_JUMP_DEPTH
# [user@]host[:port], host may be [IPv6]; ssh:// may stand in front.
# Compiled (and cached) by `re` at first use, as gpuws.core.validation's patterns (#35).
_ADDRESS_PATTERN = (
    r"(?a)(?:ssh://)?(?:(?P<user>[^@/\s]+)@)?(?P<host>\[[^\]\s]+\]|[^:@/\s\[\]]+)(?::(?P<port>\d{1,5}))?/?")


class JumpChainError(GpuwsError):
    """A jump chain that cannot be followed: a loop, a missing profile, too many hops."""


@dataclass(frozen=True)
class JumpHop:
    """One element of a jump chain: a profile name, or an address with optional user and port."""

    profile: str | None = None
    host: str | None = None
    user: str | None = None
    port: int | None = None

    def spec(self) -> str:
        """This hop as it is written in a profile's `jump`."""
        if self.profile is not None:
            return self.profile
        assert self.host is not None
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port is not None else ""
        return f"ssh://{user}{host}{port}"


def is_profile_reference(spec: str) -> bool:
    """Whether `spec` is one profile name (the form older profiles always have)."""
    return re.fullmatch(NAME_PATTERN, spec) is not None


def parse_jump(spec: str) -> list[JumpHop]:
    """The hops of a jump spec; raises ValidationError("jump", ...) naming what is wrong."""
    hops: list[JumpHop] = []
    parts = spec.split(",")
    if len(parts) > MAX_JUMP_HOPS:
        raise ValidationError("jump", f"at most {MAX_JUMP_HOPS} jump hosts")
    for part in parts:
        part = part.strip()
        if is_profile_reference(part):
            hops.append(JumpHop(profile=part))
            continue
        match = re.fullmatch(_ADDRESS_PATTERN, part)
        if match is None or not part:
            raise ValidationError("jump", "each jump host is a profile name or [user@]host[:port]")
        port = int(match.group("port")) if match.group("port") else None
        if port is not None and not 1 <= port <= 65535:
            raise ValidationError("jump", "a jump host's port must be 1-65535")
        hops.append(JumpHop(host=match.group("host").strip("[]"), user=match.group("user"), port=port))
    return hops


def jump_profile_names(spec: str | None) -> list[str]:
    """The profile names a jump spec refers to (none for addresses); [] when unparsable."""
    if not spec:
        return []
    try:
        return [hop.profile for hop in parse_jump(spec) if hop.profile is not None]
    except ValidationError:
        return []


def address_profile(hop: JumpHop) -> HostProfile:
    """A profile for an address hop: the agent and default keys, as `ssh -J user@host:port` uses."""
    assert hop.host is not None
    return HostProfile(name=hop.spec(), host=hop.host, port=hop.port or 22, user=hop.user, auth=AuthMethod.AGENT)


def jump_hops(profile: HostProfile, lookup: Callable[[str], HostProfile]) -> list[HostProfile]:
    """The hosts to pass on the way to `profile`, outermost first; refuses loops and long chains.

    `lookup` returns the profile of a name (raising GpuwsError when there is none).
    """
    hops: list[HostProfile] = []

    def expand(current: HostProfile, seen: tuple[str, ...]) -> None:
        if not current.jump:
            return
        if len(seen) > MAX_JUMP_HOPS:  # checked going down too: a 5,000-deep chain never recurses 5,000 times
            raise JumpChainError(f"the jump chain of {profile.name!r} is longer than {MAX_JUMP_HOPS} hosts")
        try:
            chain = parse_jump(current.jump)
        except ValidationError as exc:
            raise JumpChainError(f"jump hosts of {current.name!r}: {exc.reason}") from None
        for position, hop in enumerate(chain):
            if hop.profile is None:
                hops.append(address_profile(hop))
            else:
                if hop.profile in seen:
                    path = " -> ".join([*seen, hop.profile])
                    raise JumpChainError(f"jump hosts form a loop: {path}")
                try:
                    target = lookup(hop.profile)
                except GpuwsError:
                    raise JumpChainError(
                        f"jump host profile {hop.profile!r} of {current.name} does not exist") from None
                if position == 0:  # `ssh -J a,b`: a's own jump hosts apply, b's are replaced
                    expand(target, (*seen, hop.profile))
                hops.append(target)
            if len(hops) > MAX_JUMP_HOPS:
                raise JumpChainError(f"the jump chain of {profile.name!r} is longer than {MAX_JUMP_HOPS} hosts")

    expand(profile, (profile.name,))
    return hops
