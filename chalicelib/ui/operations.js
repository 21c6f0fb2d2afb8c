// Bulk actions over a list's filter (POST /executions/bulk), counted before they are
// confirmed (POST /executions/bulk/count), and a bulk operation's page: its progress
// (GET /operations/{id}) until it ends, with abort while it runs.

import { get, path, post } from './api.js';
import { badge, facts, fill, h, link, when } from './dom.js';

/** Statuses each action applies to: a button is offered only for a list of one of them. */
const APPLIES = {
  retry: ['FAILED'],
  cancel: ['PENDING', 'QUEUED', 'RETRYING'],
  delete: ['SUCCESS', 'FAILED', 'CANCELLED'],
};
const LABELS = { retry: 'Retry all matching', cancel: 'Cancel all matching', delete: 'Delete all matching' };
const CONSEQUENCE = {
  retry: 'queued again with a new attempt budget and delivered again. Deliveries cannot be taken back.',
  cancel: 'cancelled and never delivered. This cannot be undone.',
  delete: 'deleted with their attempts and logs. This cannot be undone.',
};
/** While an operation runs, its page is read again this often (the view's own refresh is slower). */
const RUNNING_REFRESH_MS = 1000;

/** The bulk filter of the execution list's query (GET /executions' names to the body's). */
export function bulkFilter(params) {
  const filter = {};
  for (const [query, field] of [['status', 'status'], ['endpoint', 'endpoint'], ['error_type', 'error_type'],
    ['since', 'created_after'], ['until', 'created_before']]) {
    const value = params.get(query);
    if (value) filter[field] = value;
  }
  return filter;
}

function describe(filter) {
  const parts = [];
  if (filter.endpoint) parts.push(`of ${filter.endpoint}`);
  if (filter.error_type) parts.push(`whose last error was ${filter.error_type}`);
  if (filter.created_after) parts.push(`created from ${filter.created_after}`);
  if (filter.created_before) parts.push(`created before ${filter.created_before}`);
  return parts.length ? ` ${parts.join(', ')}` : '';
}

function howMany(counted) {
  const n = counted.matched.toLocaleString('en');
  return counted.more ? `more than ${counted.limit.toLocaleString('en')}` : n;
}

/** The bulk actions that apply to the list's status, each counting before it asks. */
export function bulkActions(ctx) {
  const filter = bulkFilter(ctx.params);
  const actions = Object.keys(APPLIES).filter((a) => APPLIES[a].includes(filter.status));
  if (!actions.length) return null;
  return h('div', { class: 'actions bulk' }, h('span', { class: 'bulk-label' }, 'Everything this filter matches:'),
    actions.map((action) => ctx.action(LABELS[action],
    () => post('/executions/bulk', { action, filter }), {
      confirm: async () => {
        const counted = await post('/executions/bulk/count', { filter });
        if (!counted.matched) {
          ctx.say(`No ${filter.status} execution matches this filter: nothing to ${action}.`, 'info');
          return null;
        }
        return `Now this filter matches ${howMany(counted)} ${filter.status} execution(s)${describe(filter)}. `
          + `Each is ${CONSEQUENCE[action]} The set is fixed when you confirm; the operation `
          + 'then runs in the background and can be aborted.';
      },
      done: (operation) => {
        ctx.go(`#/operation/${encodeURIComponent(operation.operation_id)}`);
        return `${LABELS[action]}: operation ${operation.operation_id} ${operation.state}`;
      },
    })));
}

function operationFacts(op) {
  const filter = op.filter || {};
  const shown = Object.entries(filter).filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : v}`).join('; ');
  const rows = [
    ['Action', op.action], ['State', badge(op.state)],
    ['Matched', String(op.matched)], ['Done', String(op.done)], ['Refused', String(op.refused)],
    ['Filter', shown || 'every execution'], ['Created', when(op.created_at)], ['Ended', when(op.ended_at)],
  ];
  if (op.error) rows.push(['Error', h('span', { class: 'error' }, op.error)]);
  return facts(rows);
}

function bar(op) {
  const total = op.matched || 0;
  const el = h('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': total,
    'aria-valuenow': op.done });
  for (const [n, kind] of [[op.done, 'success'], [op.refused, 'cancelled']]) {
    if (!n || !total) continue;
    const part = h('span', { class: `p-${kind}` });
    part.style.width = `${(100 * n) / total}%`;
    el.append(part);
  }
  const text = `${op.done} done, ${op.refused} refused of ${op.matched} matched`
    + (op.state === 'RUNNING' ? ' so far' : '');
  return h('div', { class: 'progress-wrap' }, el, h('span', { class: 'progress-text' }, text));
}

/** The execution list's query for an operation's filter (one status: the list shows one). */
function listQuery(filter) {
  const statuses = filter.status || [];
  const query = { status: statuses.length === 1 ? statuses[0] : '' };
  for (const [field, name] of [['endpoint', 'endpoint'], ['error_type', 'error_type'],
    ['created_after', 'since'], ['created_before', 'until']]) {
    if (filter[field]) query[name] = filter[field];
  }
  return query;
}

export async function operationView(root, ctx) {
  const [id] = ctx.args;
  const head = h('div');
  root.append(h('h1', null, 'Bulk operation ', id), head);
  let soon = null;
  async function load() {
    const op = await get(path('/operations/', id));
    const abort = op.state === 'RUNNING'
      ? ctx.action('Abort', () => post(path('/operations/', id, '/abort')), {
        done: (r) => `Operation ${r.operation_id} ${r.state}`,
        confirm: `Operation ${id} stops after the page in flight: what it did stays done, the rest `
          + 'of its set is left as it is, and an aborted operation cannot be resumed.',
      })
      : null;
    fill(head, bar(op), operationFacts(op), h('div', { class: 'actions operation' }, abort,
      link('The executions of this filter', ['executions'], listQuery(op.filter || {}))));
    clearTimeout(soon);
    if (op.state === 'RUNNING') soon = setTimeout(() => ctx.refresh(load), RUNNING_REFRESH_MS);
  }
  await ctx.poll(load);
}
