"""The scheduler: cron tick materializer, delayed promoter, stuck reclaimer.

Entry points: ``python -m chalicelib.scheduler`` (all loops, long-lived),
:func:`chalicelib.scheduler.runner.run_scheduler_until` (the local stack runs it in a
thread), and the EventBridge-scheduled Lambda functions in
:mod:`chalicelib.scheduler.lambdas` (one loop each). The loops themselves live in
``materializer``, ``promoter``, ``reclaimer`` and ``housekeeper``; ``service`` wires them;
they run on the shared loop runtime (:mod:`chalicelib.runtime`).
"""
