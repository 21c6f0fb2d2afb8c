// Overview: executions by status, the last hour's deliveries, lag, workers, and each
// endpoint's health (the API's: executions of the last 24 h, as a job's health counts).

import { get } from './api.js';
import { hourChart } from './charts.js';
import { ago, badge, fill, h, link, ms, section, table } from './dom.js';
import { EXECUTION_STATUSES } from './enums.js';

function statusCards(counts) {
  return h('div', { class: 'cards' }, EXECUTION_STATUSES.map((status) =>
    h('a', { class: `card s-${status.toLowerCase()}`, href: `#/executions?status=${status}` },
      h('span', { class: 'count' }, String(counts[status] || 0)), h('span', null, status))));
}

function endpointRows(endpoints) {
  return endpoints.map((e) => [
    link(e.endpoint, ['endpoint', e.endpoint]), badge(e.health),
    String(e.total), String(e.succeeded), String(e.failed),
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
    section('Deliveries (attempts) and failures, last hour', chart,
      h('p', { class: 'legend' }, h('span', { class: 'key ok' }), 'delivered ', h('span', { class: 'key bad' }), 'failed')),
    section('Oldest due execution', lag),
    section('Endpoints: health over the executions of the last 24 h', endpoints),
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
    fill(endpoints, table(['Endpoint', 'Health', 'Executions', 'Succeeded', 'Failed'],
      endpointRows(o.endpoints || []), 'No execution in the last 24 h.'));
    fill(workers, table(['Worker', 'Status', 'Last heartbeat'],
      o.workers.map((w) => [w.component, badge(w.status), ago(w.last_beat_at)]), 'No worker seen in the last hour.'));
  });
}
