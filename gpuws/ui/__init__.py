"""The PySide6 user interface: small widgets per feature over the core and remote layers."""
