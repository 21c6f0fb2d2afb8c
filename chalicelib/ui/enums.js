// The values the API accepts and returns for its enumerations, offered as choices in the
// filters (a unit test holds them equal to the service's own enumerations).

export const EXECUTION_STATUSES = ['PENDING', 'QUEUED', 'RUNNING', 'RETRYING', 'SUCCESS', 'FAILED', 'CANCELLED'];
export const JOB_STATUSES = ['ACTIVE', 'RETIRED'];
export const TRIGGERS = ['IMMEDIATE', 'DELAYED', 'CRON'];
/** Why an endpoint is paused (paused_reason), with what each means. */
export const PAUSED_REASONS = ['GONE', 'FAILING', 'OPERATOR'];
export const PAUSED_REASON_TEXT = {
  GONE: 'its target answered 410 Gone',
  FAILING: 'every attempt failed for longer than its auto-pause window',
  OPERATOR: 'paused by hand',
};
/** An endpoint's or a job's health over the last 24 hours. */
export const HEALTHS = ['HEALTHY', 'DEGRADED', 'FAILING', 'IDLE'];
/** attempts.error.type: the delivery's errors, then the scheduler's (WORKER_LOST, UNPROCESSABLE). */
export const ERROR_TYPES = ['TIMEOUT', 'HTTP_ERROR', 'CONNECTION_ERROR', 'BROKER_ERROR', 'STREAM_ERROR',
  'TEMPLATE_RESOLUTION_FAILED', 'REQUEST_TOO_LARGE', 'INTERNAL_ERROR', 'EXPIRED', 'WORKER_LOST', 'UNPROCESSABLE'];
