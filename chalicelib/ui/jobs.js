// Jobs (filters: endpoint, trigger, status) -> job (versions, health and last-24 h stats,
// next run, executions, cancel, pause/resume, run now) and batches (progress, jobs by
// execution status, cancel). Every list is paged with the API's cursors.

import { get, path, post } from './api.js';
import { progress } from './charts.js';
import { badge, choice, facts, fill, filterForm, h, link, ms, pre, section, table, when } from './dom.js';
import { endpointField } from './endpoints.js';
import { EXECUTION_STATUSES, JOB_STATUSES, TRIGGERS } from './enums.js';
import { pager } from './pager.js';

/** A job's latest execution, linked: one click from the job list to why it failed. */
function executionCell(execution) {
  if (!execution) return '–';
  return h('span', null, badge(execution.status), ' ', link(execution.execution_id, ['execution', execution.execution_id]));
}

export async function jobsView(root, ctx) {
  const p = ctx.params;
  const query = Object.fromEntries(['endpoint', 'trigger', 'status'].map((n) => [n, p.get(n)]));
  const list = pager(ctx, '/jobs', query, (jobs) =>
    table(['Job', 'Endpoint', 'Trigger', 'Status', 'Latest execution', 'Created'], jobs.map((j) => [
      link(j.job_id, ['job', j.job_id]), link(j.endpoint, ['endpoint', j.endpoint]), j.trigger,
      j.paused_at ? badge('PAUSED') : badge(j.status),
      executionCell(j.execution || j.latest_execution), when(j.created_at),
    ]), 'No job matches.'));
  const form = filterForm(ctx, 'jobs', [endpointField(p.get('endpoint')),
    choice('trigger', TRIGGERS, p.get('trigger'), 'any trigger'),
    choice('status', JOB_STATUSES, p.get('status'), 'any status')]);
  root.append(h('h1', null, p.get('endpoint') ? `Jobs of ${p.get('endpoint')}` : 'Jobs'), form, list.el);
  await ctx.poll(list.load);
}

const CANCEL_TEXT = {
  CRON: 'is retired: no tick of its schedule runs again and it cannot be resumed.',
  ONE_SHOT: 'is cancelled: its execution waiting to run never runs.',
};

function controls(ctx, job) {
  const buttons = [];
  const cron = job.trigger === 'CRON';
  if (job.status === 'ACTIVE') {
    buttons.push(ctx.action('Cancel job', () => post(path('/jobs/', job.job_id, '/cancel')), {
      confirm: `Job ${job.job_id} ${CANCEL_TEXT[cron ? 'CRON' : 'ONE_SHOT']} This cannot be undone.`,
    }));
  }
  if (cron && job.status === 'ACTIVE') {
    const paused = Boolean(job.paused_at);
    // A resume asks nothing; a pause does: the ticks it skips never run, even once resumed.
    buttons.push(ctx.action(paused ? 'Resume' : 'Pause',
      () => post(path('/jobs/', job.job_id, paused ? '/resume' : '/pause')), paused ? {} : {
        confirm: `Job ${job.job_id} stops ticking until resumed. A tick already scheduled is `
          + 'cancelled, and the ticks due while it is paused are skipped, not run on resume.',
      }));
    buttons.push(ctx.action('Run now', () => post(path('/jobs/', job.job_id, '/trigger')), {
      confirm: `Job ${job.job_id} runs once more now, delivered to ${job.endpoint} at once `
        + '(its schedule does not move). A delivery cannot be taken back.',
    }));
  }
  return h('div', { class: 'actions' }, buttons);
}

function jobFacts(job, status) {
  const stats = (status && status.stats && status.stats.last_24h) || {};
  const rows = [
    ['Endpoint', link(job.endpoint, ['endpoint', job.endpoint])],
    ['Trigger', job.trigger], ['Status', badge(job.status)], ['Version', String(job.version)],
    ['Health', status ? badge(status.health) : '–'],
    ['Next run', job.next_run_at || job.run_at || '–'],
    ['Last 24 h', `${stats.total ?? 0} runs, ${stats.succeeded ?? 0} succeeded, ${stats.failed ?? 0} failed, avg ${ms(stats.avg_duration_ms)}, p99 ${ms(stats.p99_duration_ms)}`],
  ];
  if (job.cron) rows.splice(2, 0, ['Schedule', `${job.cron} (${job.timezone})`]);
  if (job.idempotency_key) rows.push(['Idempotency key', job.idempotency_key]);
  if (job.ordering_key) rows.push(['Ordering key', job.ordering_key]);
  if (job.concurrency_key) rows.push(['Concurrency key', job.concurrency_key]);
  if (job.paused_at) rows.push(['Paused since', when(job.paused_at)]);
  if (job.batch_id) rows.push(['Batch', link(job.batch_id, ['batch', job.batch_id])]);
  return facts(rows);
}

export async function jobView(root, ctx) {
  const [id] = ctx.args;
  const status = ctx.params.get('status');
  const head = h('div');
  const executions = pager(ctx, path('/jobs/', id, '/executions'), { status }, (runs) =>
    table(['Execution', 'Status', 'Attempts', 'Run at', 'Duration'], runs.map((e) => [
      link(e.execution_id, ['execution', e.execution_id]), badge(e.status),
      `${e.attempt_count ?? '–'} / ${e.max_attempts ?? '–'}`, when(e.run_at), ms(e.duration_ms),
    ]), status ? `No ${status} execution.` : 'No execution yet.'));
  const versions = pager(ctx, path('/jobs/', id, '/versions'), {}, (history) =>
    table(['Version', 'Job', 'Status', 'Created'], history.map((v) =>
      [String(v.version), link(v.job_id, ['job', v.job_id]), badge(v.status), when(v.created_at)])));
  const form = filterForm(ctx, `job/${encodeURIComponent(id)}`,
    [choice('status', EXECUTION_STATUSES, status, 'any status')]);
  root.append(h('h1', null, 'Job ', id), head,
    section('Executions', form, executions.el), section('Versions', versions.el));
  await ctx.poll(async () => {
    const [job, report] = await Promise.all([
      get(path('/jobs/', id)), get(path('/jobs/', id, '/status')).catch(() => null),
    ]);
    fill(head, jobFacts(job, report), controls(ctx, job), h('h3', null, 'Input'), pre(job.input));
  });
  await ctx.poll(executions.load);
  await ctx.poll(versions.load);
}

export async function batchView(root, ctx) {
  const [id] = ctx.args;
  const status = ctx.params.get('status');
  const head = h('div');
  // The API's order: newest first; the children of one batch share their creation time.
  const jobs = pager(ctx, path('/batches/', id, '/jobs'), { status }, (children) =>
    table(['Job', 'Endpoint', 'Execution'], children.map((j) =>
      [link(j.job_id, ['job', j.job_id]), j.endpoint, executionCell(j.execution || j.latest_execution)]),
    status ? `No job with a ${status} execution.` : 'No job.'));
  const form = filterForm(ctx, `batch/${encodeURIComponent(id)}`,
    [choice('status', EXECUTION_STATUSES, status, 'any status')]);
  root.append(h('h1', null, 'Batch ', id), head, section('Jobs', form, jobs.el));
  await ctx.poll(async () => {
    const batch = await get(path('/batches/', id));
    const cancel = batch.status === 'RUNNING'
      ? ctx.action('Cancel batch', () => post(path('/batches/', id, '/cancel')), {
        done: (r) => `Cancelled ${r.cancelled} execution(s)`,
        confirm: `Every execution of batch ${id} waiting to run is cancelled and its cron jobs `
          + 'are retired; running ones finish. This cannot be undone.',
      })
      : null;
    fill(head, h('p', null, badge(batch.status), ` ${batch.total} jobs, created ${when(batch.created_at)}`),
      progress(batch.counts, batch.total), h('div', { class: 'actions' }, cancel));
  });
  await ctx.poll(jobs.load);
}
