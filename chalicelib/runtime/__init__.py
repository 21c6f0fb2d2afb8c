"""The runtime every background loop shares: the interval-loop runner and the thread group.

Neutral ground: the scheduler's loops, the health stubs (heartbeat writer, region
refresher) and the worker's background loops all run on it, and it knows none of them.
:mod:`~chalicelib.runtime.loop` runs one loop; :mod:`~chalicelib.runtime.group` runs a set
of loops in threads until stopped or out of time.
"""
