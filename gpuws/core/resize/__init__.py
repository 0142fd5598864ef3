"""Slice catalog, layouts, resize planning, mig-parted import/export, provider templates, audit.

Qt-free and network-free; `gpuws.remote.resize` executes plans over a CommandRunner.
"""
