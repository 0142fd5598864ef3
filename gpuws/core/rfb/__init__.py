"""RFB 3.8 (VNC), Qt-free and network-free: messages, authentication, the framebuffer and the decoders
(Raw, CopyRect, ZRLE, Tight; Cursor, DesktopSize, ExtendedDesktopSize). The socket side lives in
`gpuws.remote.rfb`; the Qt widget in `gpuws.ui.vnc`."""
