// The dashboard's shell: sign-in (key kept in sessionStorage), hash routing, polling.

import { ApiError, key } from './api.js';
import { confirmAction, dismissConfirmation } from './confirm.js';
import { fill, h } from './dom.js';
import { executionView, executionsView } from './executions.js';
import { operationView } from './operations.js';
import { endpointView, endpointsView } from './endpoints.js';
import { batchView, jobView, jobsView } from './jobs.js';
import { overviewView } from './overview.js';
import { topicView, topicsView } from './topics.js';

const REFRESH_MS = 5000;
const ROUTES = [
  [/^overview$/, overviewView],
  [/^endpoints$/, endpointsView],
  [/^endpoint\/([^/]+)$/, endpointView],
  [/^topics$/, topicsView],
  [/^topic\/([^/]+)$/, topicView],
  [/^jobs$/, jobsView],
  [/^job\/([^/]+)$/, jobView],
  [/^execution\/([^/]+)$/, executionView],
  [/^executions$/, executionsView],
  [/^batch\/([^/]+)$/, batchView],
  [/^operation\/([^/]+)$/, operationView],
];

const view = document.getElementById('view');
const notice = document.getElementById('notice');
let generation = 0;
let timer = null;

export function say(text, kind = 'info') {
  notice.hidden = !text;
  notice.className = kind;
  notice.textContent = text || '';
}

function showError(error) {
  if (error instanceof ApiError && error.status === 401) {
    key.forget();
    signIn('The API key was refused.');
    return;
  }
  say(error instanceof ApiError ? `${error.code}: ${error.message}` : String(error), 'error');
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '') || 'overview';
  const [route, query] = raw.split('?');
  return { route, params: new URLSearchParams(query || '') };
}

/** Whether the user confirms `label`: `confirm` is the text to ask with, or a function
 * returning it (or a promise of it); no text means no. */
async function confirmed(label, confirm) {
  const message = typeof confirm === 'function' ? await confirm() : confirm;
  return Boolean(message) && confirmAction(label, message);
}

function context(mine, params, args) {
  const loaders = [];
  const ctx = {
    params,
    args,
    /** Run load now and every REFRESH_MS while this view is shown. */
    poll(load) {
      loaders.push(load);
      return ctx.refresh(load);
    },
    async refresh(only) {
      for (const load of only ? [only] : loaders) {
        if (mine !== generation) return;
        try {
          await load();
        } catch (error) {
          if (mine === generation) showError(error);
        }
      }
    },
    say,
    /** A button that calls the API, says what happened (`done(result)`), and reloads the
     * view's data. With `confirm` (what will happen, for an action that cannot be undone;
     * text, or a function returning it, or a promise of it, at the click) it asks first,
     * and does nothing unless confirmed; a function that returns no text (it said why)
     * stops the action without asking. */
    action(label, run, { done, confirm } = {}) {
      const button = h('button', { type: 'button' }, label);
      button.addEventListener('click', async () => {
        button.disabled = true;
        try {
          if (confirm && !(await confirmed(label, confirm))) return;
          const result = await run();
          say(done ? done(result) : `${label}: done`, 'ok');
          await ctx.refresh();
        } catch (error) {
          showError(error);
        } finally {
          button.disabled = false;
        }
      });
      return button;
    },
    go(hash) {
      location.hash = hash;
    },
  };
  return ctx;
}

async function render() {
  if (!key.get()) return signIn();
  const mine = ++generation;
  clearInterval(timer);
  dismissConfirmation();
  say('');
  const { route, params } = parseHash();
  const found = ROUTES.map(([re, fn]) => [route.match(re), fn]).find(([m]) => m);
  if (!found) return fill(view, h('p', null, 'No such view.'));
  const [match, fn] = found;
  const ctx = context(mine, params, match.slice(1).map(decodeURIComponent));
  fill(view);
  document.getElementById('nav').hidden = false;
  await fn(view, ctx);
  timer = setInterval(() => {
    // Not while the tab is hidden, and never two refreshes at once on a slow API.
    if (document.hidden || ctx.busy) return;
    ctx.busy = true;
    ctx.refresh().finally(() => { ctx.busy = false; });
  }, REFRESH_MS);
}

function signIn(message) {
  generation++;
  clearInterval(timer);
  dismissConfirmation();
  fill(view);
  document.getElementById('nav').hidden = true;
  document.getElementById('login').hidden = false;
  say(message || '', message ? 'error' : 'info');
}

document.getElementById('login').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = document.getElementById('key');
  const gateway = document.getElementById('gateway-key');
  key.set(input.value.trim(), gateway.value.trim());
  input.value = '';
  gateway.value = '';
  document.getElementById('login').hidden = true;
  render();
});
document.getElementById('logout').addEventListener('click', () => {
  key.forget();
  signIn();
});
window.addEventListener('hashchange', render);
render();
