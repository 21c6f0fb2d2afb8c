// Small SVG drawings made here, from numbers: the last hour's deliveries, an execution's
// attempt timeline (to scale), a batch's progress bar.

import { h, ms, s } from './dom.js';

/** Sixty stacked bars (succeeded below, failed on top), one per minute, oldest first. */
export function hourChart(minutes) {
  const width = 1000;
  const height = 160;
  const pad = 30;
  const most = Math.max(1, ...minutes.map((m) => m.succeeded + m.failed));
  const step = (width - pad) / Math.max(1, minutes.length);
  const scale = (n) => ((height - pad) * n) / most;
  const bars = minutes.map((m, i) => {
    const x = pad + i * step;
    const ok = scale(m.succeeded);
    const bad = scale(m.failed);
    const label = `${new Date(m.minute).toISOString().slice(11, 16)}Z: ${m.succeeded} delivered, ${m.failed} failed`;
    return s('g', { class: 'bar' },
      s('title', null, label),
      s('rect', { class: 'ok', x, y: height - pad - ok, width: Math.max(1, step - 1), height: ok }),
      s('rect', { class: 'bad', x, y: height - pad - ok - bad, width: Math.max(1, step - 1), height: bad }));
  });
  return s('svg', { class: 'chart', viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'Deliveries and failures per minute over the last hour' },
    s('line', { class: 'axis', x1: pad, y1: height - pad, x2: width, y2: height - pad }),
    s('text', { x: 0, y: 12, class: 'tick' }, String(most)),
    s('text', { x: 0, y: height - pad, class: 'tick' }, '0'),
    s('text', { x: pad, y: height - 6, class: 'tick' }, '-60 min'),
    s('text', { x: width, y: height - 6, class: 'tick', 'text-anchor': 'end' }, 'now'),
    bars);
}

function span(attempts, now) {
  const starts = attempts.map((a) => Date.parse(a.started_at));
  const ends = attempts.map((a) => Date.parse(a.completed_at || '') || now);
  const from = Math.min(...starts);
  return { from, to: Math.max(from + 1, ...ends) };
}

/** One row per attempt, placed and sized by its real start and duration. */
export function timeline(attempts, boxWidth, now = Date.now()) {
  if (!attempts.length) return h('p', { class: 'empty' }, 'No attempt yet.');
  // Drawn at the box's own width, so text keeps its size on a phone as on a desktop.
  const width = Math.max(300, Math.round(boxWidth || 1000));
  const row = 38;
  const left = 40;
  const { from, to } = span(attempts, now);
  const x = (t) => left + ((width - left - 4) * (t - from)) / (to - from);
  const rows = attempts.map((a, i) => {
    const start = Date.parse(a.started_at);
    const end = Date.parse(a.completed_at || '') || now;
    const y = 8 + i * row;
    const error = a.error ? `${a.error.type || 'ERROR'}: ${a.error.message || ''}` : '';
    const kind = a.error ? `${a.error.type || 'ERROR'}${a.error.status_code ? ' ' + a.error.status_code : ''}` : '';
    return s('g', { class: `attempt a-${String(a.status).toLowerCase()}` },
      s('title', null, `Attempt ${a.attempt_number}: ${a.status}, ${ms(a.duration_ms)} ${error}`),
      s('text', { x: 0, y: y + 14, class: 'tick' }, `#${a.attempt_number}`),
      s('rect', { x: x(start), y, width: Math.max(2, x(end) - x(start)), height: 18, rx: 2 }),
      // Labels of bars in the right half end at the bar's end, so they stay in the drawing.
      s('text', x(start) < width / 2
        ? { x: x(start), y: y + 31, class: 'label' }
        : { x: x(end), y: y + 31, class: 'label', 'text-anchor': 'end' },
      `${ms(a.duration_ms)} ${a.status}${kind ? ' — ' + kind : ''}`));
  });
  const height = 20 + attempts.length * row;
  return s('svg', { class: 'timeline', viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'Attempt timeline' },
    rows,
    s('text', { x: left, y: height - 2, class: 'tick' }, `0`),
    s('text', { x: width, y: height - 2, class: 'tick', 'text-anchor': 'end' }, `+${ms(to - from)}`));
}

const DONE = ['SUCCESS', 'FAILED', 'CANCELLED'];

/** A bar split by child execution status; the width of each part is its share of the total. */
export function progress(counts, total) {
  const bar = h('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': total });
  let done = 0;
  for (const status of [...DONE, 'RUNNING', 'RETRYING', 'QUEUED', 'PENDING']) {
    const n = counts[status] || 0;
    if (DONE.includes(status)) done += n;
    if (!n || !total) continue;
    const part = h('span', { class: `p-${status.toLowerCase()}`, title: `${status}: ${n}` });
    part.style.width = `${(100 * n) / total}%`;
    bar.append(part);
  }
  bar.setAttribute('aria-valuenow', done);
  return h('div', { class: 'progress-wrap' }, bar, h('span', { class: 'progress-text' }, `${done} / ${total} done`));
}
