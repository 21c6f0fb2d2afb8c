// Overview (executions by status, the last hour, lag, workers, endpoint health) and the
// endpoint list (type, paused, health, pause/resume).

import { get, items, path, post } from './api.js';
import { hourChart } from './charts.js';
import { ago, badge, fill, h, link, ms, section, table } from './dom.js';

const STATUSES = ['PENDING', 'QUEUED', 'RUNNING', 'RETRYING', 'SUCCESS', 'FAILED', 'CANCELLED'];

/** HEALTHY, DEGRADED (some attempts failed) or FAILING (none succeeded) over the last hour. */
export function health(outcome) {
  if (!outcome || outcome.succeeded + outcome.failed === 0) return 'IDLE';
  if (outcome.failed === 0) return 'HEALTHY';
  return outcome.succeeded === 0 ? 'FAILING' : 'DEGRADED';
}

function statusCards(counts) {
  return h('div', { class: 'cards' }, STATUSES.map((status) =>
    h('a', { class: `card s-${status.toLowerCase()}`, href: `#/executions?status=${status}` },
      h('span', { class: 'count' }, String(counts[status] || 0)), h('span', null, status))));
}

function endpointRows(endpoints) {
  return endpoints.map((e) => [
    link(e.endpoint, ['jobs'], { endpoint: e.endpoint }), badge(health(e)),
    String(e.succeeded), String(e.failed),
  ]);
}

export async function overviewView(root, ctx) {
  const counts = h('div');
  const chart = h('div', { class: 'chart-box' });
  const lag = h('p', { class: 'lag' });
  const workers = h('div');
  const endpoints = h('div');
  root.append(
    h('h1', null, 'Overview'),
    section('Executions: live now, ended in the last 24 h', counts),
    section('Deliveries and failures, last hour', chart,
      h('p', { class: 'legend' }, h('span', { class: 'key ok' }), 'delivered ', h('span', { class: 'key bad' }), 'failed')),
    section('Oldest due execution', lag),
    section('Endpoints, last hour', endpoints),
    section('Workers', workers),
  );
  await ctx.poll(async () => {
    const o = await get('/overview');
    fill(counts, statusCards(o.executions_by_status));
    fill(chart, hourChart(o.last_hour));
    const total = o.last_hour.reduce((n, m) => n + m.succeeded + m.failed, 0);
    chart.setAttribute('data-attempts', String(total));
    fill(lag, o.oldest_due_lag_ms === null ? 'Nothing is waiting: no due execution.'
      : `The oldest due execution has waited ${ms(o.oldest_due_lag_ms)}.`);
    fill(endpoints, table(['Endpoint', 'Health', 'Delivered', 'Failed'], endpointRows(o.endpoints || []),
      'No delivery in the last hour.'));
    fill(workers, table(['Worker', 'Status', 'Last heartbeat'],
      o.workers.map((w) => [w.component, badge(w.status), ago(w.last_beat_at)]), 'No worker seen in the last hour.'));
  });
}

function pauseButton(ctx, endpoint) {
  const paused = Boolean(endpoint.paused_at);
  const verb = paused ? 'resume' : 'pause';
  return ctx.action(paused ? 'Resume' : 'Pause',
    () => post(path('/endpoints/', endpoint.name, `/${verb}`)),
    () => `${endpoint.name}: ${paused ? 'resumed' : 'paused'}`);
}

function pausedCell(endpoint) {
  if (endpoint.paused_at) return badge('PAUSED');
  if (endpoint.held_until) return h('span', null, 'held until ', endpoint.held_until);
  return 'running';
}

export async function endpointsView(root, ctx) {
  const list = h('div');
  root.append(h('h1', null, 'Endpoints'), list);
  await ctx.poll(async () => {
    const [page, overview] = await Promise.all([get('/endpoints?limit=200'), get('/overview')]);
    const outcomes = new Map((overview.endpoints || []).map((e) => [e.endpoint, e]));
    fill(list, table(['Name', 'Type', 'Paused', 'Health (1 h)', ''],
      items(page).map((e) => [
        link(e.name, ['jobs'], { endpoint: e.name }), e.type, pausedCell(e),
        badge(health(outcomes.get(e.name))), pauseButton(ctx, e),
      ]), 'No endpoint registered yet.'));
  });
}
