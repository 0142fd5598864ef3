"""The application layer: one place for each task both front ends (CLI and window) perform.

Qt-free. `gpuws.cli` and `gpuws.ui` call these services; they call `gpuws.remote` (and the
simulation only through `gpuws.app.demo`). See docs/ARCHITECTURE.md for which task lives where.
"""
