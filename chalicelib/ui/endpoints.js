// Endpoints: the list (paged; filtered by health and paused state, as the API filters it;
// type, target, paused, health, pause/resume) and one endpoint's page
// (target, retry policy, timeout, signing, flow control, ordering, pause state and why,
// auto-pause window, health, its blocked ordering keys with a Skip button each, its failed
// executions). Health is the API's (GET /overview): the definition GET /jobs/{id}/status
// applies to a job, over the same 24 hours of executions.

import { get, items, path, post } from './api.js';
import { badge, choice, facts, fill, filterForm, h, link, ms, section, table, when } from './dom.js';
import { HEALTHS, PAUSED_REASON_TEXT } from './enums.js';
import { pager } from './pager.js';

/** Each endpoint's health and counts by name; an endpoint absent from it is IDLE. */
export async function healthByEndpoint() {
  const overview = await get('/overview');
  return new Map((overview.endpoints || []).map((e) => [e.endpoint, e]));
}

export function healthBadge(entry) {
  return badge(entry ? entry.health : 'IDLE');
}

export function healthText(entry) {
  const e = entry || { total: 0, succeeded: 0, failed: 0 };
  return `${e.total} executions in the last 24 h: ${e.succeeded} succeeded, ${e.failed} failed`;
}

/** A URL as shown: whatever precedes '@' (user, password) and every query value as '***'. */
export function safeUrl(text) {
  if (typeof text !== 'string') return '–';
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i, '$1***@').replace(/([?&][^=&#]*=)[^&#]*/g, '$1***');
}

/** An endpoint name field that offers the registered names (the first page of them). */
export function endpointField(value) {
  const names = h('datalist', { id: 'endpoint-names' });
  get('/endpoints?limit=200').then((page) =>
    fill(names, items(page).map((e) => h('option', { value: e.name })))).catch(() => {});
  return [h('input', { name: 'endpoint', placeholder: 'endpoint', list: 'endpoint-names', value: value || '' }), names];
}

function pauseButton(ctx, endpoint) {
  const paused = Boolean(endpoint.paused_at);
  const verb = paused ? 'resume' : 'pause';
  return ctx.action(paused ? 'Resume' : 'Pause',
    () => post(path('/endpoints/', endpoint.name, `/${verb}`)),
    // No confirmation: a pause is undone by Resume (its work waits, nothing is lost).
    { done: () => `${endpoint.name}: ${paused ? 'resumed' : 'paused'}` });
}

/** Why an endpoint is paused (paused_reason), its meaning as the badge's title. */
function reasonBadge(endpoint) {
  const reason = endpoint.paused_reason || 'OPERATOR';
  const shown = badge(reason);
  shown.title = PAUSED_REASON_TEXT[reason] || reason;
  return shown;
}

/** A window such as auto_pause_after_ms, in days, hours or minutes. */
function span(value) {
  if (value >= 86400000 && value % 3600000 === 0) return `${+(value / 86400000).toFixed(2)} days`;
  if (value >= 3600000) return `${+(value / 3600000).toFixed(2)} h`;
  return ms(value);
}

function pausedCell(endpoint) {
  if (endpoint.paused_at) return h('span', null, badge('PAUSED'), ' ', reasonBadge(endpoint));
  if (endpoint.held_until) return h('span', null, 'held until ', when(endpoint.held_until));
  return 'running';
}

const PAUSED_CHOICES = [['', 'paused or not'], ['true', 'paused'], ['false', 'not paused']];

function pausedChoice(value) {
  return h('select', { name: 'paused', 'aria-label': 'paused or not' }, PAUSED_CHOICES.map(([v, text]) =>
    h('option', { value: v, selected: v === (value || '') }, text)));
}

export async function endpointsView(root, ctx) {
  const p = ctx.params;
  const query = { health: p.get('health'), paused: p.get('paused') };
  const filtered = Boolean(query.health || query.paused);
  let health = new Map();
  const list = pager(ctx, '/endpoints', query, (endpoints) =>
    table(['Name', 'Type', 'Target', 'Paused', 'Health (24 h)', 'Jobs', ''], endpoints.map((e) => [
      link(e.name, ['endpoint', e.name]), e.type, h('span', { class: 'target' }, target(e)), pausedCell(e),
      healthBadge(health.get(e.name)), link('jobs', ['jobs'], { endpoint: e.name }), pauseButton(ctx, e),
    ]), filtered ? 'No endpoint matches.' : 'No endpoint registered yet.'));
  const form = filterForm(ctx, 'endpoints', [choice('health', HEALTHS, query.health, 'any health'),
    pausedChoice(query.paused)]);
  root.append(h('h1', null, 'Endpoints'), form, list.el);
  await ctx.poll(async () => {
    health = await healthByEndpoint();
  });
  await ctx.poll(list.load);
}

/** Where it delivers, by type; URLs shown without credentials or query values. */
function target(e) {
  const spec = e.spec || {};
  if (e.type === 'HTTP') return `${spec.method || ''} ${safeUrl(spec.url)}`;
  if (e.type === 'KAFKA') return `topic ${spec.topic} on ${safeUrl(spec.bootstrap_servers)}`;
  if (e.type === 'REDIS_STREAM') return `stream ${spec.stream} on ${safeUrl(spec.redis_url)}`;
  return '–';
}

function retryText(policy) {
  if (!policy) return '–';
  const tries = policy.max_attempts === 1 ? '1 attempt (no retry)' : `up to ${policy.max_attempts} attempts`;
  return `${tries}, ${policy.backoff} backoff from ${ms(policy.initial_delay_ms)} to at most ${ms(policy.max_delay_ms)}`;
}

function flowText(e) {
  const flow = e.flow_control || {};
  const parts = [];
  if (flow.rate_limit) parts.push(`at most ${flow.rate_limit.limit} per ${ms(flow.rate_limit.period_ms)}`);
  if (flow.max_concurrency) parts.push(`at most ${flow.max_concurrency} at once (all workers)`);
  if (flow.max_concurrency_per_key) parts.push(`at most ${flow.max_concurrency_per_key} of one concurrency key at once`);
  if (e.spec && e.spec.max_concurrent) parts.push(`at most ${e.spec.max_concurrent} at once per worker`);
  return parts.length ? parts.join('; ') : 'none';
}

function orderingText(e) {
  const block = e.ordering && e.ordering.on_failure === 'block';
  return block ? 'a failed head blocks its ordering key until retried or skipped'
    : "a failed head lets its ordering key's next execution start";
}

/** Skip a blocked key: its failed head stays FAILED and the next execution starts, which
 * cannot be undone, so the confirm dialog asks first. */
function skipButton(ctx, name, blocked) {
  return ctx.action('Skip',
    () => post(path('/endpoints/', name, '/ordering-keys/', blocked.key, '/skip')),
    {
      confirm: `Ordering key ${blocked.key} stops waiting for execution ${blocked.execution_id}, `
        + 'which stays FAILED; the next execution of the key starts. This cannot be undone.',
      done: () => `${blocked.key}: skipped`,
    });
}

function pauseText(e) {
  if (e.paused_at) {
    const why = PAUSED_REASON_TEXT[e.paused_reason || 'OPERATOR'] || e.paused_reason;
    return h('span', null, badge('PAUSED'), ' ', reasonBadge(e), ` since ${when(e.paused_at)}: ${why}`);
  }
  if (e.held_until) return `running; deliveries held until ${when(e.held_until)}`;
  return 'running';
}

function endpointFacts(e, entry) {
  const spec = e.spec || {};
  const rows = [
    ['Type', e.type], ['Target', target(e)],
    ['Retry policy', retryText(e.retry_policy)], ['Timeout', ms(spec.timeout_ms)],
    // The name of the secret that signs, never its value (the API does not return it).
    ['Signing', spec.signing_secret ? `on (secret ${spec.signing_secret})` : 'off'],
    ['Flow control', flowText(e)], ['Ordering', orderingText(e)], ['Pause', pauseText(e)],
    ['Auto-pause', e.auto_pause_after_ms == null ? 'off (a 410 Gone still pauses it)'
      : `after ${span(e.auto_pause_after_ms)} of failed attempts only, or at a 410 Gone`],
    ['Health', h('span', null, healthBadge(entry), ' ', healthText(entry))],
  ];
  if (spec.expected_status_codes) rows.push(['Expected statuses', spec.expected_status_codes.join(', ')]);
  if (spec.headers) rows.push(['Headers', Object.keys(spec.headers).join(', ') + ' (values not shown)']);
  for (const name of ['payload_spec', 'config', 'on_success', 'on_failure']) {
    if (e[name]) rows.push([name.replace('_', ' '), e[name]]);
  }
  rows.push(['Created', when(e.created_at)], ['Updated', when(e.updated_at)]);
  return facts(rows);
}

export async function endpointView(root, ctx) {
  const [name] = ctx.args;
  const head = h('div');
  const failed = pager(ctx, '/executions', { status: 'FAILED', endpoint: name }, (rows) =>
    table(['Execution', 'Job', 'Error', 'Created'], rows.map((x) => [
      link(x.execution_id, ['execution', x.execution_id]), link(x.job_id, ['job', x.job_id]),
      h('span', { class: 'error' }, [x.error_type, x.error].filter(Boolean).join(': ')), when(x.created_at),
    ]), 'No failed execution.'));
  const blocked = pager(ctx, path('/endpoints/', name, '/ordering-keys'), { state: 'blocked' }, (rows) =>
    table(['Ordering key', 'Failed execution', 'Blocked since', ''], rows.map((k) => [
      k.key, link(k.execution_id, ['execution', k.execution_id]), when(k.since), skipButton(ctx, name, k),
    ]), 'No blocked ordering key.'));
  root.append(h('h1', null, 'Endpoint ', name), head,
    h('p', null, link('Its jobs', ['jobs'], { endpoint: name }), ' · ',
      link('All its executions', ['executions'], { status: '', endpoint: name })),
    section('Failed executions', failed.el),
    section('Blocked ordering keys', blocked.el));
  await ctx.poll(async () => {
    const [endpoint, health] = await Promise.all([get(path('/endpoints/', name)), healthByEndpoint()]);
    fill(head, endpointFacts(endpoint, health.get(name)), h('div', { class: 'actions' }, pauseButton(ctx, endpoint)));
  });
  await ctx.poll(blocked.load);
  await ctx.poll(failed.load);
}
