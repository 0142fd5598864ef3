"""The SSH layer's tests use the shared fixtures in tests/conftest.py (isolated HOME, async tests)."""
