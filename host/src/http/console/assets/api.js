// The console's only way to the host: the same API every client uses. Requests are sent
// once; nothing here retries.
//
// The session cookie alone proves nothing (browsers send it to every port of this
// machine). The login hands this page its session's proof in the address's fragment
// (`#proof=…`, never sent to a server); it is kept in localStorage — scoped to this
// origin, so to this host's port — taken out of the address bar, and sent as
// `X-Butler-Proof` on every request. What the page loads without fetch (event streams,
// icons) carries it as the `proof` query parameter, which the host takes on those routes only.

const BASE = '/myspace-butler/api';
const PROOF_KEY = 'butler.proof';
const PROOF_HEADER = 'x-butler-proof';

let proof = null;

/** Keeps the proof a login put in the address's fragment, and removes it from the address. */
function takeProof() {
  const given = /^#proof=([0-9a-f]{64})$/.exec(location.hash);
  if (given) {
    proof = given[1];
    try {
      localStorage.setItem(PROOF_KEY, proof);
    } catch {
      /* private mode: the proof lasts for this page */
    }
    history.replaceState(null, '', location.pathname + location.search);
    return;
  }
  try {
    proof = localStorage.getItem(PROOF_KEY);
  } catch {
    proof = null;
  }
}

takeProof();

/** Whether this page holds a session's proof (it was logged in by a link). */
export function hasProof() {
  return Boolean(proof);
}

/** Forgets this session's proof (after logging out). */
export function forgetProof() {
  proof = null;
  try {
    localStorage.removeItem(PROOF_KEY);
  } catch {
    /* nothing kept */
  }
}

/** `url` (one of the host's streams or icons) with this session's proof as its query. */
export function withProof(url) {
  if (!proof || typeof url !== 'string' || !url.startsWith(BASE + '/')) return url;
  return `${url}${url.includes('?') ? '&' : '?'}proof=${encodeURIComponent(proof)}`;
}

export class ApiFailure extends Error {
  constructor(code, message, status, details = null) {
    super(message);
    this.code = code;
    this.status = status;
    /** The error's `details`, when the host sent any (a package's problems, say). */
    this.details = details;
  }
}

/** method + API path (+ JSON body, + extra headers) → the parsed JSON answer, or throws ApiFailure. */
export async function call(method, path, body, { owner = false, headers: extra = {} } = {}) {
  const headers = { ...extra };
  if (body !== undefined) headers['content-type'] = 'application/json';
  // The owner gate's third signal; the browser adds Origin and Sec-Fetch-Site itself.
  if (owner) headers['x-butler-review'] = '1';
  if (proof) headers[PROOF_HEADER] = proof;
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

/** A stream's URL for EventSource, which cannot send a header: the proof in its query. */
export function streamUrl(path) {
  return withProof(BASE + path);
}

/** A fresh idempotency key. */
export function freshKey() {
  if (globalThis.crypto && crypto.randomUUID) return crypto.randomUUID();
  return `k-${Date.now()}-${Math.random().toString(16).slice(2)}`;
}
