"""The `pagemind` command line."""
