"""The `hetsched` command line."""
