// The console's entry: hash routing between the views, the language switch, the layout
// store shared by the boards, and live updates from `GET /events` (one server-sent event
// stream; the host says what changed and only the view showing it reloads).

import { call, get, hasProof, streamUrl } from './api.js';
import { duration, h, replace } from './dom.js';
import { lang, setLang, t } from './i18n.js';
import { reviewView } from './review.js';
import { libraryView } from './library.js';
import { boardView, openLog, openPanel } from './boards.js';
import { butlerView, loggedOut } from './butler.js';
import { diagnosticsView, mcpView } from './status.js';
import { packagesView } from './packages.js';
import { settingsView } from './settings.js';

const VIEWS = {
  review: { key: 'nav_review', render: reviewView, watches: ['queue', 'mcp', 'runs'] },
  library: { key: 'nav_library', render: libraryView, watches: [] },
  tools: { key: 'nav_tools', render: (main, ctx) => boardView(main, ctx, 'tools'), watches: ['catalog', 'supervised', 'layout', 'mcp'] },
  services: { key: 'nav_services', render: (main, ctx) => boardView(main, ctx, 'services'), watches: ['catalog', 'supervised', 'layout', 'mcp'] },
  butler: { key: 'nav_butler', render: butlerView, watches: ['catalog', 'reports'] },
  mcp: { key: 'nav_mcp', render: mcpView, watches: ['catalog', 'mcp', 'mcpActivity'] },
  packages: { key: 'nav_packages', render: packagesView, watches: [] },
  diagnostics: { key: 'nav_diagnostics', render: diagnosticsView, watches: ['catalog'] },
  settings: { key: 'nav_settings', render: settingsView, watches: [] },
};

/**
 * The saved display preferences. `seq` counts saves: a read that started before a save
 * is dropped when it answers, so an older poll never overwrites a just-saved preference.
 */
const layout = {
  saved: { version: 1 },
  seq: 0,
  saving: 0,
  async load() {
    const seq = this.seq;
    const data = await get('/layout');
    if (seq === this.seq && this.saving === 0 && data && data.version === 1) this.saved = data;
    return this.saved;
  },
  async save(next) {
    this.seq += 1;
    this.saving += 1;
    try {
      this.saved = await call('PUT', '/layout', next);
      return this.saved;
    } finally {
      this.saving -= 1;
      this.seq += 1;
    }
  },
};

const main = document.getElementById('main');
const nav = document.getElementById('nav');
let current = null; // {name, view}
let pending = null;
let problems = 0; // catalog diagnostics that are errors or warnings (not compiles in progress)
let renderSeq = 0;

const ctx = {
  layout,
  state: {},
  /** The parts the event stream last sent (null until it has): `mcpActivity` is the newest seq. */
  events: null,
  setPending(n) {
    pending = n;
    renderNav();
  },
  changed(what) {
    refresh(new Set([what]));
  },
  openLog,
  openPanel,
};

function route() {
  const name = location.hash.replace(/^#\/?/, '').split('/')[0];
  return VIEWS[name] ? name : 'review';
}

function renderNav() {
  const active = route();
  replace(nav, h('ul', null, Object.entries(VIEWS).map(([name, v]) => h('li', null,
    h('a', { href: `#/${name}`, 'aria-current': name === active ? 'page' : null, 'data-view': name }, t(v.key),
      name === 'review' && pending ? h('span', { class: 'count', 'aria-label': `(${pending})` }, String(pending)) : null,
      name === 'diagnostics' && problems
        ? h('span', { class: 'count warn', 'data-count': 'diagnostics', 'aria-label': t('problems', { n: problems }) }, String(problems))
        : null)))));
  const button = document.getElementById('lang');
  button.textContent = t('other_lang');
  button.setAttribute('aria-label', t('other_lang_name'));
  const logout = document.getElementById('logout');
  logout.textContent = t('logout');
  logout.hidden = !hasProof();
  document.querySelector('.skip').textContent = t('skip');
}

/** Changes announced while a view was being drawn: it may have drawn them already or not. */
let missed = new Set();
let rendering = 0;

async function show(focus = false) {
  // Logged out: the page says so until it is reloaded.
  if (document.body.dataset.loggedOut === 'true') return;
  const name = route();
  const seq = ++renderSeq;
  renderNav();
  document.body.dataset.view = name;
  document.body.dataset.ready = 'false';
  rendering += 1;
  try {
    const view = await VIEWS[name].render(main, ctx);
    if (seq !== renderSeq) return;
    current = { name, view };
  } catch (e) {
    if (seq !== renderSeq) return;
    current = { name, view: null };
    replace(main, h('p', { class: 'error' }, t('load_failed', { msg: `${e.message} (${e.code || 'error'})` })));
  } finally {
    rendering -= 1;
  }
  document.body.dataset.ready = 'true';
  if (focus) {
    // A new view starts at its top, its heading below the header: focusing `main` would
    // scroll it to the viewport's top edge, under the sticky header.
    main.focus({ preventScroll: true });
    window.scrollTo(0, 0);
  }
  if (missed.size) {
    const again = missed;
    missed = new Set();
    refresh(again);
  }
}

let refreshing = false;
let queued = new Set();

/** Reloads the current view when something it shows changed. */
async function refresh(what) {
  if (rendering) {
    // Drawn with data fetched before the change, maybe: looked at again once drawn.
    for (const w of what) missed.add(w);
    return;
  }
  for (const w of what) queued.add(w);
  if (refreshing) return;
  refreshing = true;
  try {
    while (queued.size) {
      const batch = queued;
      queued = new Set();
      if (!current) continue;
      // A view may watch fewer parts than its entry says (the MCP view's tabs).
      const watches = (current.view && current.view.watches) || VIEWS[current.name].watches;
      if (![...batch].some((w) => watches.includes(w))) continue;
      // A form the owner is typing in (a rejection reason, a search) is not thrown away.
      if (current.view && current.view.refresh) await current.view.refresh(batch).catch(() => null);
      else if (!main.contains(document.activeElement) || document.activeElement === main) await show();
    }
  } finally {
    refreshing = false;
  }
}

function listen() {
  const source = new EventSource(streamUrl('/events'));
  let last = null;
  source.addEventListener('change', (e) => {
    let now;
    try {
      now = JSON.parse(e.data);
    } catch {
      return;
    }
    ctx.events = now;
    if (last) {
      const what = new Set(Object.keys(now).filter((k) => now[k] !== last[k]));
      // `report:<faculty>/<report>`: a watched report changed; the review queue is the one
      // the manifests say provides it.
      for (const k of [...what]) {
        if (!k.startsWith('report:')) continue;
        what.add('reports');
        if (queueReport && k === `report:${queueReport}`) what.add('queue');
      }
      if (what.has('catalog')) queueReport = undefined;
      const awaiting = what.has('queue') || what.has('runs') || what.has('mcp');
      if (awaiting && current && current.name !== 'review') updatePending();
      if (what.has('catalog')) updateProblems();
      if (what.size) refresh(what);
    }
    last = now;
  });
}

/** `<faculty>/<report>` of the report that provides the review queue (null: none). */
let queueReport;

async function findQueueReport() {
  if (queueReport !== undefined) return queueReport;
  const data = await get('/faculties');
  queueReport = null;
  for (const faculty of data.faculties || []) {
    const report = (faculty.reports || []).find((r) => r.provides === 'review-queue');
    if (report) {
      queueReport = `${faculty.id}/${report.id}`;
      break;
    }
  }
  return queueReport;
}

/** How many candidates the review queue holds (0 without a queue). */
async function queueCount() {
  const found = await findQueueReport();
  if (!found) return 0;
  const [faculty, id] = found.split('/');
  const report = await get(`/faculties/${encodeURIComponent(faculty)}/reports/${encodeURIComponent(id)}`);
  return (report.items || []).length;
}

/** How many delegations' results await the owner's confirmation. */
async function runsCount() {
  return ((await get('/runs')).runs || []).filter((r) => r.status === 'awaiting_confirmation').length;
}

/** How many remote MCP servers need the owner to log in (again). */
async function loginsCount() {
  return ((await get('/mcp/status')).providers || []).filter((p) => p.login && p.login.state === 'needed').length;
}

/** How many MCP items the quarantine holds for the owner's approval. */
async function heldCount() {
  const report = await get('/mcp/quarantine');
  return report.enabled ? (report.held || []).length : 0;
}

let counting = null;
let countAgain = false;
let countedAt = 0;
/** Counts at most this often: reading the quarantine starts providers not yet listed, and a
 * provider that keeps failing to start must not be started again at every change it announces. */
const COUNT_EVERY_MS = 5000;

/**
 * The Review tab's badge, from any other view: what the review view lists — candidates,
 * delegations awaiting confirmation, held MCP items, remote servers that need a login. Each part is optional (0 when it
 * cannot be read); a change announced while counting is counted again once it is done.
 */
function updatePending() {
  if (counting) {
    countAgain = true;
    return counting;
  }
  counting = (async () => {
    do {
      countAgain = false;
      const wait = countedAt + COUNT_EVERY_MS - Date.now();
      if (countedAt && wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      countedAt = Date.now();
      const parts = await Promise.all([queueCount(), runsCount(), heldCount(), loginsCount()].map((p) => p.catch(() => 0)));
      if (current && current.name === 'review') return; // the view counts them itself
      ctx.setPending(parts.reduce((a, b) => a + b, 0));
    } while (countAgain);
  })().finally(() => {
    counting = null;
  });
  return counting;
}

/** The Diagnostics tab's badge: how many manifests have a problem now. */
async function updateProblems() {
  try {
    const catalog = await get('/catalog');
    const found = (catalog.diagnostics || []).filter((d) => d.severity === 'error' || d.severity === 'warning').length;
    if (found !== problems) {
      problems = found;
      renderNav();
    }
  } catch {
    /* shown again on the next change */
  }
}

// Uptimes tick on the page itself: no request, and nothing while the tab is hidden.
setInterval(() => {
  if (document.hidden) return;
  for (const el of document.querySelectorAll('[data-since]')) {
    el.textContent = t('uptime', { d: duration(Date.now() - Number(el.dataset.since)) });
  }
}, 1000);

document.getElementById('lang').addEventListener('click', () => {
  setLang(lang() === 'zh' ? 'en' : 'zh');
  show();
});
document.getElementById('logout').addEventListener('click', async (e) => {
  const button = e.currentTarget;
  button.disabled = true;
  button.textContent = t('logging_out');
  try {
    await call('POST', '/console/logout', {}, { owner: true });
  } catch (failure) {
    // Already ended elsewhere (or expired): this page is logged out all the same.
    if (failure.code !== 'owner_required') {
      button.disabled = false;
      button.textContent = t('logout');
      document.getElementById('status').textContent = t('failed', { msg: `${failure.message} (${failure.code})` });
      return;
    }
  }
  button.disabled = false;
  loggedOut();
});
window.addEventListener('hashchange', () => show(true));
// The header's height, for what the browser scrolls into view to stop below it.
const header = document.querySelector('header.top');
new ResizeObserver(() => {
  document.documentElement.style.setProperty('--header-height', `${header.offsetHeight}px`);
}).observe(header);
setLang(lang());
show().then(async () => {
  await findQueueReport().catch(() => null);
  listen();
  if (route() !== 'review') updatePending();
  updateProblems();
});
