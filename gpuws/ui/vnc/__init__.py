"""The built-in VNC viewer: a thin Qt widget over `gpuws.app.viewer.ViewerSession` (`view.py`), the
keyboard's table from Qt keys to X keysyms (`keys.py`) and the viewer window (`window.py`)."""
