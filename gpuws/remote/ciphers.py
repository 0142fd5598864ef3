"""Which SSH ciphers gpuws offers, cheapest first.

A telemetry stream is many small packets; per packet, asyncssh's chacha20-poly1305 (OpenSSH's
first choice) builds new cipher contexts for the length, the payload and the MAC key, while
AES-GCM reuses one `AESGCM` object and runs on the CPU's AES instructions. Both are AEAD ciphers
of the same strength class; the server still picks from this list only what it supports, so a
host without AES-GCM falls back to chacha20-poly1305 or AES-CTR as before.
`benchmarks/bench_ssh_client.py` measures the difference.
"""

from __future__ import annotations

from typing import Any, Final

PREFERRED_ENCRYPTION: Final = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
)


def encryption_options(preferred: tuple[str, ...] = PREFERRED_ENCRYPTION) -> dict[str, Any]:
    """asyncssh connect options: `preferred`, less any cipher this asyncssh cannot do."""
    import asyncssh.encryption

    supported = {alg.decode() for alg in asyncssh.encryption.get_encryption_algs()}
    algs = [alg for alg in preferred if alg in supported]
    return {"encryption_algs": algs} if algs else {}
