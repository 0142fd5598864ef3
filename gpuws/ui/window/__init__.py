"""The parts of the main window, one module per responsibility (assembled in `gpuws.ui.main_window`).

`base` holds what every part shares (signals, stores, notices); `actions` the actions, menus and
dialogs; `hosts` the host list (profiles, sessions, demo, host keys); `tabs` the detail area;
`tray` the idle and tray chores.
"""
