"""Jobs: creating them, by one path, and managing them.

Read in this order:

* :mod:`.create`: the one way a job is created, for ``POST /jobs``, ``POST /jobs/batch``,
  ``PUT /jobs/{id}`` (a cron job's new version) and the jobs that callbacks and completed
  batches create: the wake-up decision, the inputs checked before the transaction, and the
  write (one ``jobs_create`` statement for every job and one-shot execution of a request).
* :mod:`.fastpath`: ``POST /jobs``'s one-statement strategy for an endpoint the job
  service has already read (the service owns that memory, :class:`.fastpath.KnownEndpoints`).
* :mod:`.fanout`: ``POST /jobs`` with ``topic``: the request expanded into one item per
  endpoint of the topic, written by :mod:`.create` in one transaction, all or nothing.
* :mod:`.rows`: the typed rows a creation reads and writes, and the view it answers with.
* :mod:`.service`: the job use cases (create, read, find by key, list, update, reschedule a
  DELAYED job, cancel, trigger, pause).
* :mod:`.status`: a job's health and executions.

Cron ticks are not here: the scheduler's materializer creates executions of existing cron
jobs (``scheduler_cron_apply_ticks``), never jobs.
"""
