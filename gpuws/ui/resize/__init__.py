"""The Resize tab's parts: target picker, comparison, plan, processes, typed confirmation,
progress with outcome, and the audit history. `gpuws.ui.tabs.resize.ResizeTab` puts them together;
`operations` holds the coroutines they run on the loop thread (never Qt)."""
