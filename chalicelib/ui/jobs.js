// Jobs (filters: endpoint, trigger, status) -> job (versions, health and last-24 h stats,
// next run, executions, cancel, pause/resume, run now) and batches (progress, cancel).

import { get, items, path, post, withQuery } from './api.js';
import { progress } from './charts.js';
import { badge, fill, h, link, ms, pre, section, table, when } from './dom.js';

const TRIGGERS = ['', 'IMMEDIATE', 'DELAYED', 'CRON'];
const JOB_STATUSES = ['', 'ACTIVE', 'RETIRED'];

function select(name, options, value) {
  return h('select', { name }, options.map((o) =>
    h('option', { value: o, selected: o === value }, o || `any ${name}`)));
}

function filters(ctx) {
  const p = ctx.params;
  const form = h('form', { class: 'filters' },
    h('input', { name: 'endpoint', placeholder: 'endpoint', value: p.get('endpoint') || '' }),
    select('trigger', TRIGGERS, p.get('trigger') || ''),
    select('status', JOB_STATUSES, p.get('status') || ''),
    h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (value) query.set(name, value);
    ctx.go(`#/jobs?${query}`);
  });
  return form;
}

/** A job's latest execution, linked: one click from the job list to why it failed. */
function executionCell(execution) {
  if (!execution) return '–';
  return h('span', null, badge(execution.status), ' ', link(execution.execution_id, ['execution', execution.execution_id]));
}

export async function jobsView(root, ctx) {
  const list = h('div');
  const title = ctx.params.get('endpoint') ? `Jobs of ${ctx.params.get('endpoint')}` : 'Jobs';
  root.append(h('h1', null, title), filters(ctx), list);
  const query = Object.fromEntries(['endpoint', 'trigger', 'status'].map((n) => [n, ctx.params.get(n)]));
  await ctx.poll(async () => {
    const page = await get(withQuery('/jobs', { ...query, limit: 100 }));
    fill(list, table(['Job', 'Endpoint', 'Trigger', 'Status', 'Latest execution', 'Created'],
      items(page).map((j) => [
        link(j.job_id, ['job', j.job_id]), j.endpoint, j.trigger,
        j.paused_at ? badge('PAUSED') : badge(j.status),
        executionCell(j.execution || j.latest_execution), when(j.created_at),
      ]), 'No job matches.'));
  });
}

function controls(ctx, job) {
  const buttons = [];
  if (job.status === 'ACTIVE') {
    buttons.push(ctx.action('Cancel job', () => post(path('/jobs/', job.job_id, '/cancel'))));
  }
  if (job.trigger === 'CRON' && job.status === 'ACTIVE') {
    const paused = Boolean(job.paused_at);
    buttons.push(ctx.action(paused ? 'Resume' : 'Pause',
      () => post(path('/jobs/', job.job_id, paused ? '/resume' : '/pause'))));
    buttons.push(ctx.action('Run now', () => post(path('/jobs/', job.job_id, '/trigger'))));
  }
  return h('div', { class: 'actions' }, buttons);
}

function facts(job, status) {
  const stats = (status && status.stats && status.stats.last_24h) || {};
  const rows = [
    ['Endpoint', link(job.endpoint, ['jobs'], { endpoint: job.endpoint })],
    ['Trigger', job.trigger], ['Status', badge(job.status)], ['Version', String(job.version)],
    ['Health', status ? badge(status.health) : '–'],
    ['Next run', job.next_run_at || job.run_at || '–'],
    ['Last 24 h', `${stats.total ?? 0} runs, ${stats.succeeded ?? 0} succeeded, ${stats.failed ?? 0} failed, avg ${ms(stats.avg_duration_ms)}, p99 ${ms(stats.p99_duration_ms)}`],
  ];
  if (job.cron) rows.splice(2, 0, ['Schedule', `${job.cron} (${job.timezone})`]);
  if (job.idempotency_key) rows.push(['Idempotency key', job.idempotency_key]);
  if (job.paused_at) rows.push(['Paused since', when(job.paused_at)]);
  if (job.batch_id) rows.push(['Batch', link(job.batch_id, ['batch', job.batch_id])]);
  return h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}

export async function jobView(root, ctx) {
  const [id] = ctx.args;
  const head = h('div');
  const executions = h('div');
  const versions = h('div');
  root.append(h('h1', null, 'Job ', id), head,
    section('Executions', executions), section('Versions', versions));
  await ctx.poll(async () => {
    const [job, status, runs, history] = await Promise.all([
      get(path('/jobs/', id)), get(path('/jobs/', id, '/status')).catch(() => null),
      get(path('/jobs/', id, '/executions?limit=50')), get(path('/jobs/', id, '/versions')),
    ]);
    fill(head, facts(job, status), controls(ctx, job), h('h3', null, 'Input'), pre(job.input));
    fill(executions, table(['Execution', 'Status', 'Attempts', 'Run at', 'Duration'],
      items(runs).map((e) => [link(e.execution_id, ['execution', e.execution_id]), badge(e.status),
        `${e.attempt_count ?? '–'} / ${e.max_attempts ?? '–'}`, when(e.run_at), ms(e.duration_ms)]),
      'No execution yet.'));
    fill(versions, table(['Version', 'Job', 'Status', 'Created'],
      items(history).map((v) => [String(v.version), link(v.job_id, ['job', v.job_id]), badge(v.status), when(v.created_at)])));
  });
}

export async function batchView(root, ctx) {
  const [id] = ctx.args;
  const head = h('div');
  const jobs = h('div');
  root.append(h('h1', null, 'Batch ', id), head, section('Jobs', jobs));
  await ctx.poll(async () => {
    const [batch, page] = await Promise.all([get(path('/batches/', id)), get(path('/batches/', id, '/jobs?limit=100'))]);
    const cancel = batch.status === 'RUNNING'
      ? ctx.action('Cancel batch', () => post(path('/batches/', id, '/cancel')), (r) => `Cancelled ${r.cancelled} execution(s)`)
      : null;
    fill(head, h('p', null, badge(batch.status), ` ${batch.total} jobs, created ${when(batch.created_at)}`),
      progress(batch.counts, batch.total), h('div', { class: 'actions' }, cancel));
    fill(jobs, table(['Job', 'Endpoint', 'Execution'],
      items(page).map((j) => [link(j.job_id, ['job', j.job_id]), j.endpoint, executionCell(j.execution || j.latest_execution)])));
  });
}
