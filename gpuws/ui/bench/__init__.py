"""Widgets of the Benchmarks tab: run controls and live log, the results table, the datasheet
chart, history and comparison, and export. The tab itself is `gpuws.ui.tabs.benchmarks`."""
