"""Repositories: functions that run named queries in a transaction and return rows."""
