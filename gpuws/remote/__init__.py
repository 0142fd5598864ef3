"""The remote layer: everything that talks SSH (asyncssh), on its own asyncio loop thread."""
