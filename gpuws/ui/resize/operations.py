"""The Resize tab's remote work: the application layer's resize service (`gpuws.app.resize`).

The tab runs these coroutines (reads and plans) on the loop thread through the bridge and turns the
plain results into widgets on the GUI thread. Nothing here is implemented twice: the CLI calls the
same service.
"""

from __future__ import annotations

from gpuws.app.resize import (
    LayoutRun,
    MigApplied,
    MigPreview,
    PlanChanged,
    interrupted_resize,
    mig_parted_config_names,
    mig_parted_target,
    preview_mig,
    read_audit,
    read_gpus,
)

# What changes a layout or an instance type is not here: the tab goes through the Workspace verbs
# (`resize`, `recover`, `resize_instance`, `recover_instance`), as the CLI does.
__all__ = ["LayoutRun", "MigApplied", "MigPreview", "PlanChanged", "interrupted_resize", "mig_parted_config_names",
           "mig_parted_target", "preview_mig", "read_audit", "read_gpus"]
