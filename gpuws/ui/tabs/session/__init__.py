"""The Session tab: running cost and budget, tunnels, terminal, remote desktop, files, and instance
start/stop.

A view of the `Workspace` (gpuws.app.workspace), subscribed once: the Workspace keeps the cost
ledger (the same file `gpuws cost` reads), the idle policy and every host's tunnels, and follows
reconnects; the tab shows the selected host's share of them and passes the user's choices on.
Cost is re-read on a timer and after each ledger write. Remote work always runs on the loop
thread through the bridge.

The tab is assembled from parts, one module per card, as the main window is (`gpuws.ui.window`):
`base` holds what every card shares (the shown host, the Workspace, its connection); `cost` the
running cost and budgets; `access` the terminal and files; `desktop` the remote desktop; `tunnels`
the host's tunnels; `instance` start/stop and the idle policy; `tab` assembles them.
"""

from gpuws.ui.tabs.session.tab import SessionTab

__all__ = ["SessionTab"]
