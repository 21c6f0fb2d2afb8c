// One execution (attempt timeline to scale, errors, logs, output, cancel, retry) and the
// execution list by status: FAILED is the dead-letter view, with retry and redrive. A list
// of one status offers the bulk actions that apply to it over its filter (operations.js).

import { get, items, path, post } from './api.js';
import { timeline } from './charts.js';
import { badge, choice, facts, fill, filterForm, h, link, ms, pre, section, table, when } from './dom.js';
import { endpointField } from './endpoints.js';
import { ERROR_TYPES, EXECUTION_STATUSES } from './enums.js';
import { bulkActions } from './operations.js';
import { pager } from './pager.js';

const CANCELLABLE = ['PENDING', 'QUEUED', 'RETRYING'];

function errorText(error) {
  if (!error) return '';
  const code = error.status_code ? ` (HTTP ${error.status_code})` : '';
  return `${error.type || 'ERROR'}${code}: ${error.message || ''}`;
}

function retryButton(ctx, id) {
  return ctx.action('Retry', () => post(path('/executions/', id, '/retry')), {
    done: (e) => `Retried: ${e.status}`,
    confirm: `Execution ${id} is queued again with a new attempt budget and delivered to its `
      + 'endpoint again. A delivery cannot be taken back.',
  });
}

function summary(ctx, e, attempts) {
  const failed = attempts.filter((a) => a.error);
  const last = failed[failed.length - 1];
  const rows = [
    ['Status', badge(e.status)], ['Job', link(e.job_id, ['job', e.job_id])],
    ['Endpoint', link(e.endpoint, ['endpoint', e.endpoint])], ['Type', e.endpoint_type],
    ['Attempts', `${e.attempt_count} / ${e.max_attempts}`], ['Run at', when(e.run_at)],
    ['Duration', ms(e.duration_ms)], ['Completed', when(e.completed_at)],
  ];
  if (e.queue_position !== null && e.queue_position !== undefined) rows.push(['Queue position', String(e.queue_position)]);
  const buttons = [];
  if (CANCELLABLE.includes(e.status)) {
    buttons.push(ctx.action('Cancel', () => post(path('/executions/', e.execution_id, '/cancel')), {
      confirm: `Execution ${e.execution_id} is cancelled and never delivered. This cannot be undone.`,
    }));
  }
  if (e.status === 'FAILED') buttons.push(retryButton(ctx, e.execution_id));
  return [
    last && e.status !== 'SUCCESS' ? h('p', { class: 'why' }, 'Why it failed: ', h('strong', null, errorText(last.error))) : null,
    facts(rows),
    h('div', { class: 'actions' }, buttons),
  ];
}

export async function executionView(root, ctx) {
  const [id] = ctx.args;
  const head = h('div');
  const chart = h('div', { class: 'chart-box' });
  const attemptList = h('div');
  const logs = pager(ctx, path('/executions/', id, '/logs'), {}, (lines) =>
    table(['Time', 'Attempt', 'Level', 'Message'],
      lines.map((l) => [when(l.logged_at), String(l.attempt_number), badge(l.level), l.message]), 'No log line.'));
  const output = h('div');
  root.append(h('h1', null, 'Execution ', id), head, section('Attempt timeline', chart),
    section('Attempts', attemptList), section('Logs', logs.el), section('Input and output', output));
  await ctx.poll(async () => {
    const [e, attempts] = await Promise.all([get(path('/executions/', id)),
      get(path('/executions/', id, '/attempts?limit=200'))]);
    const tries = items(attempts);
    fill(head, summary(ctx, e, tries));
    fill(chart, timeline(tries, chart.clientWidth));
    fill(attemptList, table(['#', 'Status', 'Started', 'Duration', 'Error', 'Output'],
      tries.map((a) => [String(a.attempt_number), badge(a.status), when(a.started_at), ms(a.duration_ms),
        h('span', { class: 'error' }, errorText(a.error)), pre(a.output)]), 'No attempt yet.'));
    fill(output, h('h3', null, 'Input'), pre(e.input), h('h3', null, 'Output'), pre(e.output));
  });
  await ctx.poll(logs.load);
}

/** The list's filters: GET /executions' status, endpoint, error type and creation range. */
const LIST_FILTERS = ['status', 'endpoint', 'error_type', 'since', 'until'];

function listFilters(ctx, status) {
  const p = ctx.params;
  const instant = (name, placeholder) => h('input', { name, placeholder, 'aria-label': placeholder,
    class: 'instant', value: p.get(name) || '' });
  // status is kept even when empty: '' is any status, no status at all is FAILED.
  return filterForm(ctx, 'executions', [choice('status', EXECUTION_STATUSES, status, 'any status'),
    endpointField(p.get('endpoint')), choice('error_type', ERROR_TYPES, p.get('error_type'), 'any error type'),
    instant('since', 'created from (ISO)'), instant('until', 'created before (ISO)')],
  ['status']);
}

function redriveForm(ctx) {
  const hourAgo = new Date(Date.now() - 3600e3).toISOString();
  const form = h('form', { class: 'filters redrive' },
    h('input', { name: 'endpoint', placeholder: 'endpoint', required: true, value: ctx.params.get('endpoint') || '' }),
    h('input', { name: 'since', placeholder: 'since (ISO)', value: hourAgo }),
    h('input', { name: 'until', placeholder: 'until (ISO)', value: new Date(Date.now() + 60e3).toISOString() }),
    choice('error_type', ERROR_TYPES, '', 'any error type'),
    h('button', { type: 'submit' }, 'Redrive'));
  const data = () => Object.fromEntries(new FormData(form));
  const run = ctx.action('Redrive', () => {
    const { endpoint, since, until, error_type: errorType } = data();
    const body = { since, until };
    if (errorType) body.error_type = errorType;
    return post(path('/endpoints/', endpoint, '/redrive'), body);
  }, {
    done: (r) => `Requeued ${r.requeued} execution(s)`,
    confirm: () => {
      const { endpoint, since, until, error_type: errorType } = data();
      const which = errorType ? ` whose last error was ${errorType}` : '';
      return `Every FAILED execution of ${endpoint} created from ${since} to ${until}${which} `
        + 'is queued again (at most 5,000) and delivered again. Deliveries cannot be taken back.';
    },
  });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    run.click();
  });
  run.hidden = true;
  return h('div', null, form, run);
}

export async function executionsView(root, ctx) {
  const status = ctx.params.get('status') ?? 'FAILED';
  const query = Object.fromEntries(LIST_FILTERS.map((n) => [n, ctx.params.get(n)]));
  query.status = status;
  if (!ctx.params.has('status')) ctx.params.set('status', status); // the bulk filter's too
  const list = pager(ctx, '/executions', query, (rows) =>
    table(['Execution', 'Endpoint', 'Status', 'Error', 'Finished', ''], rows.map((e) => [
      h('span', { class: 'whole' }, link(e.execution_id, ['execution', e.execution_id])),
      link(e.endpoint, ['endpoint', e.endpoint]), badge(e.status),
      h('span', { class: 'error' }, typeof e.error === 'object' && e.error ? errorText(e.error) : [e.error_type, e.error].filter(Boolean).join(': ')),
      h('span', { class: 'whole' }, when(e.completed_at)), e.status === 'FAILED' ? retryButton(ctx, e.execution_id) : '',
    ]), status ? `No ${status} execution.` : 'No execution matches.'));
  const bulk = bulkActions(ctx);
  root.append(h('h1', null, `Executions: ${status || 'any status'}`), listFilters(ctx, status),
    ...(bulk ? [bulk] : []), list.el);
  if (status === 'FAILED') root.append(section('Redrive failed executions of an endpoint', redriveForm(ctx)));
  await ctx.poll(list.load);
}
