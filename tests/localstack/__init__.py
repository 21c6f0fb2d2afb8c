"""LocalStack in host mode for the end-to-end tests (see plugin.py)."""
