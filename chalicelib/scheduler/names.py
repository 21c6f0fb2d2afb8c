"""Names of the scheduler loops (shared by the service and the Lambda entry points).

Kept in a module of their own so ``app.py`` can register the scheduled functions without
importing the database driver at cold start.
"""

CRON_MATERIALIZER = "cron_materializer"
DELAYED_PROMOTER = "delayed_promoter"
STUCK_RECLAIMER = "stuck_reclaimer"
HOUSEKEEPER = "housekeeper"
BULK_OPERATOR = "bulk_operator"
