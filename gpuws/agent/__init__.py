"""On-host scripts sent over SSH and run by the host's own python3; standalone by design."""
