"""ssh_config import equals `ssh -G`: a corpus of configs resolved by the real OpenSSH client in the
test (openssh-client is installed by scripts/install-deps.sh), compared field by field with
gpuws' resolver for hostname, user, port, identity files in order and the proxy jump chain."""

from __future__ import annotations

import getpass
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuws.core.jumps import parse_jump
from gpuws.core.sshconfig import ResolvedHost, import_ssh_config, resolve_host

SSH = shutil.which("ssh")
pytestmark = pytest.mark.ssh_client  # skipped without `ssh` outside the test command; fails in it

# ssh -G prints these when no IdentityFile is configured.
DEFAULT_IDENTITIES = ["~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
                      "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa"]

# (config text, extra files under ~/.ssh, aliases to compare). "{SSH_DIR}" is the test's ~/.ssh.
CORPUS: list[tuple[str, dict[str, str], list[str]]] = [
    (  # trailing comments, first value wins, Host * defaults, '=' syntax, keyword case
        "Host bastion3\n  HostName 10.0.0.3 # the bastion\n  User ops # comment\n"
        "Host gpu\n  hostname=gpu.example.com\n  PORT = 2222\n  User first\n  User second\n"
        "Host *\n  User default-user\n  Port 22\n",
        {}, ["bastion3", "Bastion3", "gpu", "GPU", "unknown-host"],
    ),
    (  # identity files: several, ${HOME}, relative, ~, duplicates, tokens kept as written
        "Host keys\n  IdentityFile ${HOME}/.ssh/a\n  IdentityFile rel/key\n  IdentityFile ~/.ssh/b\n"
        "  IdentityFile ~/.ssh/b\n  IdentityFile %d/.ssh/%h_%r\n  User u\n"
        "Host *\n  IdentityFile ~/.ssh/global\n",
        {}, ["keys", "other"],
    ),
    (  # jump chains in every form ssh takes
        "Host chain\n  HostName target.example\n  ProxyJump Bastion3,u@h2:2222,ssh://v@h3:2200\n"
        "Host single\n  ProxyJump bastion3\nHost bastion3\n  HostName 10.0.0.3\n"
        "Host none-jump\n  ProxyJump none\nHost *\n  ProxyJump fallback.example\n",
        {}, ["chain", "single", "bastion3", "none-jump", "x"],
    ),
    (  # ProxyCommand and ProxyJump exclude each other: the first one wins
        "Host pc\n  ProxyCommand nc %h %p\n  ProxyJump b\nHost pj\n  ProxyJump b\n  ProxyCommand nc %h %p\n",
        {}, ["pc", "pj"],
    ),
    (  # Include inside a Host block applies only when that block matches; state restored after
        "Host outer\n  Include {SSH_DIR}/inner.conf\n  Port 2201\nHost inner-alias\n  User late\n"
        "Include conf.d/*.conf\n",
        {"inner.conf": "Host inner-alias\n  HostName inner.example\n  Port 2202\nHost *\n  User from-include\n",
         "conf.d/a.conf": "Host from-a\n  HostName a.example\n",
         "conf.d/b.conf": "Host from-b outer\n  HostName b.example\n  User b-user\n"},
        ["outer", "inner-alias", "from-a", "from-b"],
    ),
    (  # negated patterns and wildcards
        "Host *.example.com !bad.example.com\n  User wild\nHost gpu? box-*\n  Port 2300\n"
        "Host bad.example.com good.example.com\n  HostName %h.internal\n",
        {}, ["bad.example.com", "good.example.com", "gpu7", "box-1", "gpu77"],
    ),
    (  # Match host/originalhost/user/localuser/all, negations; Match host sees HostName so far
        "Host alias1\n  HostName Real1.Example.COM\n"
        "Match host real1.example.com\n  User matched-host\n"
        "Match originalhost alias2\n  Port 2400\n"
        "Match !originalhost alias1,alias2\n  Port 2401\n"
        "Match user root,ops localuser {LOCAL_USER}\n  IdentityFile ~/.ssh/by-user\n"
        "Match all\n  User from-all\n",
        {}, ["alias1", "alias2", "alias3"],
    ),
    (  # issue 36, the per-alias index: an alias in several literal blocks, a negated literal,
       # an Include under a literal block holding `Host *` and Match, nested Includes, options
       # after an Include back in the including block, Match host after a literal HostName
        "Host a !b c\n  User from-abc\nHost b\n  Port 2501\nHost c\n  Include {SSH_DIR}/under-c.conf\n"
        "  Port 2502\nHost a\n  HostName Real-A.example\n  User late\n"
        "Match host real-a.example\n  IdentityFile ~/.ssh/by-match\n"
        "Host *\n  Port 2503\n  User last\n",
        {"under-c.conf": "  User inherited-c\nHost *\n  HostName from-include.example\n"
                         "Match all\n  IdentityFile ~/.ssh/only-c\nInclude {SSH_DIR}/deeper.conf\n",
         "deeper.conf": "Host c a\n  ProxyJump bastion.example\n"},
        ["a", "b", "c", "d"],
    ),
    (  # quoted values and escapes
        'Host quoted\n  HostName "quoted.example"\n  User \'o\'ps\n  IdentityFile "~/.ssh/with space"\n',
        {}, ["quoted"],
    ),
]


def ssh_dash_g(alias: str, config: Path, home: Path) -> dict[str, list[str]]:
    assert SSH is not None
    out = subprocess.run([SSH, "-G", "-F", str(config), "--", alias], capture_output=True, text=True,
                         env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL,
                         timeout=30, check=True).stdout
    fields: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        fields.setdefault(key, []).append(value)
    return fields


def hops(spec: str | None) -> list[tuple[str | None, str | None, str | None, int | None]]:
    if spec is None or spec.lower() == "none":
        return []
    return [(h.profile, h.host, h.user, h.port) for h in parse_jump(spec)]


def expected_vs_ours(ours: ResolvedHost, openssh: dict[str, list[str]]) -> tuple[dict[str, object], dict[str, object]]:
    theirs = {
        "hostname": openssh["hostname"][0],
        "user": openssh["user"][0],
        "port": int(openssh["port"][0]),
        "identity_files": openssh.get("identityfile", []),
        "proxy_jump": hops(openssh.get("proxyjump", [None])[0]),
        "proxy_command": openssh.get("proxycommand", [None])[0],
    }
    mine = {
        "hostname": ours.hostname,
        "user": ours.user or getpass.getuser(),
        "port": int(ours.port or 22),
        "identity_files": ours.identity_files or DEFAULT_IDENTITIES,
        "proxy_jump": hops(ours.proxy_jump),
        "proxy_command": ours.proxy_command,
    }
    return mine, theirs


@pytest.mark.parametrize("case", range(len(CORPUS)))
def test_resolution_equals_ssh_dash_g_field_by_field(case: int, isolated_home: Path) -> None:
    text, files, aliases = CORPUS[case]
    ssh_dir = isolated_home / ".ssh"
    ssh_dir.mkdir(exist_ok=True)
    subs = {"{SSH_DIR}": str(ssh_dir), "{LOCAL_USER}": getpass.getuser()}
    for name, body in files.items():
        (ssh_dir / name).parent.mkdir(parents=True, exist_ok=True)
        for key, value in subs.items():
            body = body.replace(key, value)
        (ssh_dir / name).write_text(body)
    for key, value in subs.items():
        text = text.replace(key, value)
    config = ssh_dir / "config"
    config.write_text(text)
    for path in ssh_dir.rglob("*"):  # ssh refuses included files others can write
        path.chmod(0o700 if path.is_dir() else 0o600)
    for alias in aliases:
        ours = resolve_host(alias, config, ssh_dir=ssh_dir)
        mine, theirs = expected_vs_ours(ours, ssh_dash_g(alias, config, isolated_home))
        for name in theirs:
            assert mine[name] == theirs[name], f"config {case}, alias {alias!r}, field {name}"


def test_imported_profiles_carry_the_resolved_chain(isolated_home: Path) -> None:
    ssh_dir = isolated_home / ".ssh"
    ssh_dir.mkdir(exist_ok=True)
    config = ssh_dir / "config"
    config.write_text("Host chain\n  HostName target.example\n  ProxyJump Bastion3,u@h2:2222,ssh://v@h3:2200\n"
                      "Host single\n  ProxyJump bastion3,u@h2\nHost bastion3\n  HostName 10.0.0.3\n"
                      "Host via-wild\n  ProxyJump other.example\nHost none-jump\n  ProxyJump none\n"
                      "Host *.example\n  User wild\n  Port 2022\n")
    result = import_ssh_config(config)
    profiles = {p.name: p for p in result.profiles}
    # "Bastion3" does not match `Host bastion3` (ssh matches Host patterns case-sensitively), so it is
    # an address; "bastion3" (exact) refers to the imported profile; an address hop is resolved
    # through the config as ssh resolves a jump host (Host *.example gives user and port).
    assert profiles["chain"].jump == "ssh://bastion3,ssh://u@h2:2222,ssh://v@h3:2200"
    assert profiles["single"].jump == "bastion3,ssh://u@h2"
    assert profiles["via-wild"].jump == "ssh://wild@other.example:2022"
    assert profiles["none-jump"].jump is None
    order = [p.name for p in result.profiles]
    assert order.index("bastion3") < order.index("single")
