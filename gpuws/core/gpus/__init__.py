"""The GPU registry: models, aliases and PCI device ids, datasheet figures, MIG profiles and the
clock-event (throttle) reason bits. The resize catalog, the inventory's MIG profile names, the
benchmark datasheets and the simulated host all derive from it.
"""
