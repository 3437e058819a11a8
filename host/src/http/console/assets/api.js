// The console's only way to the host: the same API every client uses. Requests are sent
// once; nothing here retries.

const BASE = '/myspace-butler/api';

export class ApiFailure extends Error {
  constructor(code, message, status, details = null) {
    super(message);
    this.code = code;
    this.status = status;
    /** The error's `details`, when the host sent any (a package's problems, say). */
    this.details = details;
  }
}

/** method + API path (+ JSON body) → the parsed JSON answer, or throws ApiFailure. */
export async function call(method, path, body, { owner = false } = {}) {
  const headers = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  // The owner gate's third signal; the browser adds Origin and Sec-Fetch-Site itself.
  if (owner) headers['x-butler-review'] = '1';
  let response;
  try {
    response = await fetch(BASE + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiFailure('network', String(e && e.message ? e.message : e), 0);
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok || (data && data.ok === false)) {
    const error = (data && data.error) || {};
    throw new ApiFailure(error.code || `http_${response.status}`, error.message || response.statusText, response.status,
      error.details || null);
  }
  return data;
}

export const get = (path) => call('GET', path);

/** A pipeline action → its `data`. */
export async function pipeline(action, args = {}, owner = false) {
  const answer = await call('POST', '/pipeline', { action, args }, { owner });
  return answer.data;
}

export function apiUrl(path) {
  return BASE + path;
}

/** A fresh idempotency key. */
export function freshKey() {
  if (globalThis.crypto && crypto.randomUUID) return crypto.randomUUID();
  return `k-${Date.now()}-${Math.random().toString(16).slice(2)}`;
}
