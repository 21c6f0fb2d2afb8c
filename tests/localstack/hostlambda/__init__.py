"""The host Lambda executor distribution (te_hostlambda): see its package docstring."""
