// The REST API as the dashboard calls it: same origin, the key from session storage in the
// Authorization header (never in a URL or a cookie), errors as the API's envelope says.

const KEY = 'te_api_key';
/** API Gateway's own key (AWS: a usage plan identifies each client by it). */
const GATEWAY_KEY = 'te_gateway_key';
/** Where the API is: the page is served at <base>/ui (a stage prefix in API Gateway). */
const BASE = location.pathname.replace(/\/ui\/?$/, '');

export const key = {
  get: () => sessionStorage.getItem(KEY),
  set(value, gateway) {
    sessionStorage.setItem(KEY, value);
    if (gateway) sessionStorage.setItem(GATEWAY_KEY, gateway);
    else sessionStorage.removeItem(GATEWAY_KEY);
  },
  forget() {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(GATEWAY_KEY);
  },
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** A path from fixed text and data parts: path('/jobs/', id, '/executions'). */
export function path(...parts) {
  return parts.map((p, i) => (i % 2 ? encodeURIComponent(String(p)) : p)).join('');
}

export function withQuery(p, query) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== null && value !== undefined && value !== '') params.set(name, value);
  }
  const text = params.toString();
  return text ? `${p}?${text}` : p;
}

export async function call(method, p, body) {
  const headers = { Authorization: `Bearer ${key.get() || ''}` };
  const gateway = sessionStorage.getItem(GATEWAY_KEY);
  if (gateway) headers['x-api-key'] = gateway;
  const init = { method, headers, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(BASE + p, init);
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || `HTTP_${response.status}`,
      error.message || response.statusText);
  }
  return data;
}

export const get = (p) => call('GET', p);
export const post = (p, body) => call('POST', p, body);

/** A page's items and the cursor of the next one (the API names it cursor or next_cursor). */
export function items(page) {
  return (page && page.items) || [];
}
