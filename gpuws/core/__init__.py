"""The Qt-free, network-free core: models, parsing, profiles, stores and planning logic.

Nothing here imports Qt, asyncssh or the remote/ui/cli layers (enforced by import-linter).
"""
