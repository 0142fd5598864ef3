"""Test support: real OpenSSH sshd on loopback, simulated host installation, helpers."""
