// A list paged with the API's cursors: Previous / Next, one page of PAGE_SIZE at a time.
// The page shown is read again on every refresh, so a list left open stays current; the
// cursors of the pages seen are kept, so Previous returns to the page shown before.

import { get, withQuery } from './api.js';
import { fill, h } from './dom.js';

export const PAGE_SIZE = 50;

/**
 * A paged list of the API's `path` with `query`: `{ el, load }`, `load` for ctx.poll.
 * `show(items)` returns what to show for one page's items (a table).
 */
export function pager(ctx, path, query, show) {
  const cursors = [null]; // cursors[i] reads page i + 1; null reads the first page
  let index = 0;
  let reads = 0;
  const body = h('div');
  const where = h('span', { class: 'page-no' });
  const previous = h('button', { type: 'button', class: 'previous' }, 'Previous');
  const next = h('button', { type: 'button', class: 'next' }, 'Next');
  const nav = h('div', { class: 'pager' }, previous, where, next);
  nav.hidden = true;

  async function load() {
    const mine = ++reads;
    const at = index;
    const page = await get(withQuery(path, { ...query, limit: PAGE_SIZE, cursor: cursors[at] }));
    if (mine !== reads) return; // a later read (a click) answers instead
    cursors.length = at + 1;
    if (page.cursor) cursors.push(page.cursor);
    fill(body, show((page && page.items) || []));
    fill(where, `Page ${at + 1}`);
    previous.disabled = at === 0;
    next.disabled = !page.cursor;
    nav.hidden = at === 0 && !page.cursor;
  }
  function turn(step) {
    if (index + step < 0 || index + step >= cursors.length) return;
    index += step;
    ctx.refresh(load);
  }
  previous.addEventListener('click', () => turn(-1));
  next.addEventListener('click', () => turn(1));
  return { el: h('div', { class: 'paged' }, body, nav), load };
}
