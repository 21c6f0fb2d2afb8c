// DOM building without HTML parsing: every value shown goes in as a text node or an
// attribute set by setAttribute, so nothing an API returns can become markup or script.

const SVG_NS = 'http://www.w3.org/2000/svg';

function add(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function setProps(el, props) {
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.replace(/^on/, ''), value);
    else if (name === 'class') el.setAttribute('class', value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  return el;
}

/** An HTML element: h('td', {class: 'num'}, 'text', childNode, ...). */
export function h(tag, props, ...children) {
  return add(setProps(document.createElement(tag), props), children);
}

/** An SVG element (charts and timelines). */
export function s(tag, props, ...children) {
  return add(setProps(document.createElementNS(SVG_NS, tag), props), children);
}

/** Replace el's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

/** A link inside the dashboard: '#/' + the parts, each URI-encoded (data never starts a URL). */
export function link(text, parts, query) {
  const path = parts.map((p) => encodeURIComponent(String(p))).join('/');
  const search = query ? '?' + new URLSearchParams(query).toString() : '';
  return h('a', { href: '#/' + path + search }, text);
}

export function badge(text) {
  return h('span', { class: 'badge b-' + String(text).toLowerCase().replace(/[^a-z]/g, '') }, text);
}

export function table(headers, rows, empty = 'Nothing here.') {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h(
    'div',
    { class: 'scroll' },
    h('table', null,
      h('thead', null, h('tr', null, headers.map((t) => h('th', null, t)))),
      h('tbody', null, rows.map((cells) => h('tr', null, cells.map((c) => h('td', null, c)))))),
  );
}

export function section(title, ...children) {
  return h('section', null, h('h2', null, title), ...children);
}

export function pre(value) {
  const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  return h('pre', null, text === undefined ? 'null' : text);
}

export function ms(value) {
  if (value === null || value === undefined) return '–';
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 120000) return `${(value / 1000).toFixed(1)} s`;
  return `${(value / 60000).toFixed(1)} min`;
}

export function when(iso) {
  if (!iso) return '–';
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? String(iso) : t.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function ago(iso) {
  if (!iso) return '–';
  return ms(Date.now() - new Date(iso).getTime()) + ' ago';
}

/** A select of the API's values for `name`, '' (shown as `any`) first, `value` selected. */
export function choice(name, options, value, any) {
  return h('select', { name, 'aria-label': any }, ['', ...options].map((o) =>
    h('option', { value: o, selected: o === (value || '') }, o || any)));
}

/** Filters: on submit, the non-empty fields (and those in `keep`, even empty) become the
 * query of `#/route`. */
export function filterForm(ctx, route, fields, keep = []) {
  const form = h('form', { class: 'filters' }, fields, h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (value || keep.includes(name)) query.set(name, value);
    ctx.go(`#/${route}?${query}`);
  });
  return form;
}

/** Terms and values as a definition list. */
export function facts(rows) {
  return h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}
