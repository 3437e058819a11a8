// MCP status (providers with their state, tools, rejected and held names, errors, each
// with start / stop / restart and its log; conflicts; the URL to paste), the hub's
// activity log (#/mcp/activity: filtered, paged back with `before=`, followed live with
// `after=` whenever the events say a request was answered) and catalog diagnostics. The
// providers tab is drawn again whenever the events say the hub changed.

import { call, get } from './api.js';
import { h, replace, when } from './dom.js';
import { stateText, t } from './i18n.js';

/** The tabs of the MCP view: `#/mcp` and `#/mcp/activity`. */
function mcpTabs(active) {
  const tab = (name, href, key) => h('li', null,
    h('a', { href, 'data-tab': name, 'aria-current': name === active ? 'page' : null }, t(key)));
  return h('nav', { class: 'tabs', 'aria-label': t('mcp_tabs') },
    h('ul', null, tab('providers', '#/mcp', 'providers'), tab('activity', '#/mcp/activity', 'activity')));
}

export async function mcpView(main, ctx) {
  if (location.hash.replace(/^#\/?/, '').split('/')[1] === 'activity') return activityView(main, ctx);
  const status = await get('/mcp/status');
  const url = `${location.origin}/myspace-butler/api/mcp`;
  const copied = h('span', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const field = h('input', { type: 'text', id: 'mcp-url', readonly: true, value: url, class: 'url' });
  const copy = h('button', { type: 'button', id: 'mcp-copy' }, t('copy'));
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(url);
    } catch {
      field.select();
      document.execCommand('copy');
    }
    copied.textContent = t('copied');
  });
  const providers = status.providers || [];
  const conflicts = status.conflicts || [];
  const columns = [t('provider'), t('namespace'), t('state'), t('tools'), t('rejected_names'), t('errors'), t('actions')];
  // Each cell carries its column's name: on a narrow screen the rows are stacked blocks.
  const cell = (column, ...content) => h('td', { 'data-label': columns[column] }, ...content);
  replace(main, h('h1', null, t('mcp_title')), mcpTabs('providers'),
    h('section', { class: 'card' }, h('label', { for: 'mcp-url' }, t('mcp_url')), h('div', { class: 'row' }, field, copy, copied)),
    h('h2', null, t('providers')),
    providers.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'providers stacked' },
      h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, providers.map((p) => h('tr', { 'data-provider': p.id },
        h('th', { scope: 'row' }, p.id), cell(1, h('code', null, p.namespace || '')),
        cell(2, h('span', { class: `badge state-${p.state}`, 'data-state': p.state }, stateText(p.state)), loginNote(p)),
        cell(3, (p.tools || []).map((name) => [h('code', null, name), ' ']),
          (p.held || []).length ? h('div', { class: 'muted' }, `${t('held_count', { n: p.held.length })} `, h('a', { href: '#/review' }, t('nav_review'))) : null),
        (p.rejected || []).length ? cell(4, p.rejected.map((r) => h('div', null, h('code', null, r.tool), ` — ${r.reason}`))) : h('td'),
        cell(5, `${p.errors ?? 0} / ${p.calls ?? 0} ${t('calls')}`, p.lastError ? h('div', { class: 'error' }, p.lastError) : null),
        cell(6, providerActions(p, ctx)))))))
      : h('p', { class: 'muted' }, t('none')),
    h('h2', null, t('conflicts')),
    conflicts.length ? h('ul', null, conflicts.map((c) => h('li', null, h('code', null, c.namespace), ` (${c.id}) `, t('held_by', { id: c.heldBy }))))
      : h('p', { class: 'muted' }, t('none')),
    h('h2', null, t('host_tools')),
    h('p', null, ((status.host && status.host.tools) || []).map((name) => [h('code', null, typeof name === 'string' ? name : name.name || ''), ' '])),
    h('p', { class: 'muted' }, `${t('sessions')}: ${typeof status.sessions === 'object' ? JSON.stringify(status.sessions) : status.sessions ?? 0}`));
  // Not every answered request: the counters are read when the providers change.
  return { watches: ['catalog', 'mcp'] };
}

/** Entries a page of the activity view asks for. */
const ACTIVITY_PAGE = 50;
/** Rows kept on the page at most: following a busy hub drops the oldest (`older` brings them back). */
const ACTIVITY_SHOWN = 1000;
const OUTCOMES = ['ok', 'error', 'tool_error', 'input_required', 'cancelled'];
/** Suggested in the filters beside the values the rows shown hold. */
const KNOWN = {
  method: ['tools/call', 'tools/list', 'prompts/get', 'prompts/list', 'resources/read', 'resources/list',
    'resources/templates/list', 'resources/subscribe', 'completion/complete', 'ping'],
  provider: ['host'],
  endpoint: ['main', 'butler'],
};

/**
 * The activity log, newest first, with its filters. Following goes on from the newest entry
 * the log had, whether it matches or not (as `butler mcp log --follow` does), so a filter
 * that matches little does not make each look search back through what it passed over.
 */
async function activityView(main, ctx) {
  const saved = ctx.state.mcpActivity || {};
  const suggestions = {};
  const seen = {};
  const text = (key, label, attrs = {}) => {
    suggestions[key] = h('datalist', { id: `activity-${key}-list` });
    seen[key] = new Set();
    const input = h('input', { type: 'text', id: `activity-${key}`, name: key, value: saved[key] || '', maxlength: 300,
      autocomplete: 'off', spellcheck: 'false', list: `activity-${key}-list`, ...attrs });
    return { input, label: h('label', { for: input.id }, label) };
  };
  const suggest = (key, value) => {
    if (!suggestions[key] || typeof value !== 'string' || !value || seen[key].has(value)) return;
    seen[key].add(value);
    suggestions[key].append(h('option', { value }));
  };
  const fields = {
    name: text('name', t('activity_name'), { placeholder: t('activity_name_hint') }),
    method: text('method', t('col_method')),
    provider: text('provider', t('provider')),
    endpoint: text('endpoint', t('col_endpoint')),
  };
  for (const [key, values] of Object.entries(KNOWN)) values.forEach((v) => suggest(key, v));
  const outcome = h('select', { id: 'activity-outcome', name: 'outcome' },
    h('option', { value: '' }, t('any_outcome')), OUTCOMES.map((o) => h('option', { value: o }, t(`outcome_${o}`))));
  outcome.value = OUTCOMES.includes(saved.outcome) ? saved.outcome : '';
  const clear = h('button', { type: 'button', id: 'activity-clear' }, t('clear_filters'));
  const form = h('form', { class: 'row toolbar', role: 'search', id: 'activity-filters' },
    Object.values(fields).map((f) => [f.label, f.input]),
    h('label', { for: 'activity-outcome' }, t('col_outcome')), outcome,
    h('button', { type: 'submit', class: 'primary' }, t('apply')), clear, Object.values(suggestions));
  const rows = h('tbody', { id: 'activity-rows' });
  const table = h('div', { class: 'table-wrap' }, h('table', { class: 'activity' },
    h('thead', null, h('tr', null, ['col_time', 'col_endpoint', 'col_method', 'col_name', 'provider', 'col_ms', 'col_outcome', 'col_sizes']
      .map((key) => h('th', { scope: 'col' }, t(key))))),
    rows));
  const empty = h('p', { class: 'muted empty', id: 'activity-empty' });
  const failure = h('p', { class: 'error', id: 'activity-error', role: 'alert' });
  const older = h('button', { type: 'button', class: 'more', id: 'activity-older', hidden: true }, t('older'));

  let query = null; // the filters of the rows shown, as query parameters (null: none valid)
  let epoch = 0; // which filters an answer was asked for: one asked for earlier ones is dropped
  let top = 0; // the highest seq shown: an entry at or below it is not added again
  let last = 0; // following goes on after this seq (the log's newest when last looked)
  let before = null; // the seq `older` asks before (null: nothing older)
  let loading = null; // the load in progress; following waits for it

  const filterParams = () => {
    const values = { ...Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, f.input.value.trim()])), outcome: outcome.value };
    ctx.state.mcpActivity = values;
    return Object.entries(values).filter(([, v]) => v).map(([k, v]) => `&${k}=${encodeURIComponent(v)}`).join('');
  };
  const newestSeq = async () => {
    const page = await get('/mcp/activity?limit=1');
    return (page.entries && page.entries[0] && page.entries[0].seq) || 0;
  };
  const row = (e) => {
    ['name', 'method', 'provider', 'endpoint'].forEach((key) => suggest(key, e[key]));
    return h('tr', { 'data-seq': e.seq, 'data-outcome': e.outcome, 'data-method': e.method, 'data-name': e.name || '' },
      h('td', { class: 'nowrap' }, h('time', { datetime: e.at, title: e.at }, when(e.at)),
        e.droppedBefore ? h('div', { class: 'muted' }, t('activity_dropped', { n: e.droppedBefore })) : null),
      h('td', null, h('code', null, e.endpoint || ''), e.token ? h('div', { class: 'muted' }, t('activity_token', { name: e.token })) : null),
      h('td', null, h('code', null, e.method || '')),
      h('td', { class: 'wrap' }, e.name ? h('code', null, e.name) : '—'),
      h('td', null, e.provider || '—'),
      h('td', { class: 'num' }, `${Number(e.ms || 0).toFixed(1)} ms`),
      h('td', null, h('span', { class: `badge result-${e.outcome}` }, t(`outcome_${e.outcome}`)),
        e.code === null || e.code === undefined ? null : [' ', h('code', null, String(e.code))]),
      h('td', { class: 'num' }, `${e.requestBytes ?? 0} B → ${e.responseBytes ?? 0} B`));
  };
  const showState = () => {
    const nothing = !rows.childElementCount && !failure.textContent;
    empty.textContent = nothing ? t(query ? 'activity_none_match' : 'activity_empty') : '';
    older.hidden = before === null;
  };
  /** Newer entries (oldest first) on top; beyond the bound, the oldest rows go. */
  const prepend = (entries) => {
    for (const e of entries) {
      if (e.seq <= top) continue;
      rows.prepend(row(e));
      top = e.seq;
    }
    while (rows.childElementCount > ACTIVITY_SHOWN) {
      rows.lastElementChild.remove();
      before = Number(rows.lastElementChild.dataset.seq);
    }
  };
  const load = async () => {
    const mine = ++epoch;
    const params = filterParams();
    const run = (async () => {
      // Where following will go on from: the newest entry now, whatever it matches.
      const newest = await newestSeq();
      const page = await get(`/mcp/activity?limit=${ACTIVITY_PAGE}${params}`);
      if (mine !== epoch) return;
      query = params;
      failure.textContent = '';
      rows.replaceChildren(...(page.entries || []).map(row));
      top = Math.max(newest, ...(page.entries || []).map((e) => e.seq));
      last = newest;
      before = page.next ?? null;
    })().catch((e) => {
      if (mine !== epoch) return;
      query = null;
      before = null;
      rows.replaceChildren();
      failure.textContent = t('load_failed', { msg: `${e.message} (${e.code || 'error'})` });
    }).finally(() => {
      if (loading === run) loading = null;
      if (mine === epoch) showState();
    });
    loading = run;
    return run;
  };
  const follow = async () => {
    if (loading) await loading;
    if (query === null) return;
    const mine = epoch;
    const known = ctx.events && ctx.events.mcpActivity;
    const newest = typeof known === 'number' ? known : await newestSeq();
    while (newest > last && mine === epoch) {
      const page = await get(`/mcp/activity?limit=500&after=${last}&before=${newest + 1}${query}`);
      if (mine !== epoch) return;
      const entries = page.entries || [];
      prepend(entries);
      // A full page may have more behind it: the next one goes on from its last entry.
      last = page.next === null || page.next === undefined || !entries.length ? newest : entries[entries.length - 1].seq;
    }
    showState();
  };
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    load();
  });
  outcome.addEventListener('change', () => form.requestSubmit());
  clear.addEventListener('click', () => {
    Object.values(fields).forEach((f) => { f.input.value = ''; });
    outcome.value = '';
    form.requestSubmit();
  });
  older.addEventListener('click', async () => {
    if (before === null || query === null) return;
    const mine = epoch;
    older.disabled = true;
    try {
      const page = await get(`/mcp/activity?limit=${ACTIVITY_PAGE}&before=${before}${query}`);
      if (mine !== epoch) return;
      rows.append(...(page.entries || []).map(row));
      before = page.next ?? null;
    } catch (e) {
      failure.textContent = t('load_failed', { msg: `${e.message} (${e.code || 'error'})` });
    } finally {
      older.disabled = false;
      showState();
    }
  });

  replace(main, h('h1', null, t('mcp_title')), mcpTabs('activity'),
    h('p', { class: 'muted' }, t('activity_hint')), form, failure, table, empty, older);
  // Providers the hub has, for the provider filter (it works without them).
  get('/mcp/status').then((status) => (status.providers || []).forEach((p) => suggest('provider', p.id))).catch(() => null);
  await load();
  return { watches: ['mcpActivity'], refresh: follow };
}

/** What a remote server's OAuth login says: needed (and why), or where it is logged in. */
function loginNote(p) {
  if (!p.login) return null;
  if (p.login.state === 'needed') return h('div', { class: 'error', 'data-login': 'needed' }, t('login_needed', { why: p.login.reason || '' }));
  return h('div', { class: 'muted', 'data-login': 'signed-in' }, t('logged_in_at', { issuer: p.login.issuer || '' }));
}

/** How long the Connect button waits for the login to finish (the host forgets it then too). */
const LOGIN_WAIT_MS = 10 * 60 * 1000;

/**
 * Connect (an OAuth login: the host answers the authorization URL, opened from a link in a
 * new tab, then the outcome is asked every second) or Log out, for a remote server.
 */
function loginActions(p, outcome) {
  if (!p.url) return [];
  const show = (kind, ...content) => {
    outcome.className = `outcome ${kind}`;
    outcome.replaceChildren(...content);
  };
  const failed = (action, err) => {
    outcome.dataset.code = err.code || '';
    show('error', t('action_failed', { action: t(action), msg: err.message }));
  };
  const connect = async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    try {
      const begun = (await call('POST', `/mcp/providers/${encodeURIComponent(p.id)}/login`, {}, { owner: true })).data;
      show('', h('a', { href: begun.url, target: '_blank', rel: 'noopener noreferrer', 'data-login-url': '' }, t('open_login')), ' ', t('login_waiting'));
      const until = Date.now() + LOGIN_WAIT_MS;
      while (Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        const state = (await call('GET', `/mcp/logins/${encodeURIComponent(begun.login)}`)).data;
        if (state.state === 'done') return show('ok', t('login_done'));
        if (state.state === 'failed') return failed('connect', { message: state.reason || '' });
      }
    } catch (err) {
      failed('connect', err);
    } finally {
      button.disabled = false;
    }
  };
  const disconnect = async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    try {
      await call('DELETE', `/mcp/providers/${encodeURIComponent(p.id)}/login`, undefined, { owner: true });
      show('ok', t('disconnect'));
    } catch (err) {
      failed('disconnect', err);
    } finally {
      button.disabled = false;
    }
  };
  const signedIn = p.login && p.login.state === 'signed-in';
  return [
    h('button', { type: 'button', 'data-act': 'connect', onclick: connect }, t('connect')),
    signedIn ? h('button', { type: 'button', 'data-act': 'disconnect', onclick: disconnect }, t('disconnect')) : null,
  ];
}

/** Each provider's outcome element, by id, for as long as the page is open. */
const outcomes = new Map();

/** Start, stop, restart (each sent once, the outcome shown) and the log of one provider. */
function providerActions(p, ctx) {
  // The same element across redraws (the view is drawn again whenever a provider's state
  // changes): an action's outcome, and a login under way with its link, stay shown.
  let outcome = outcomes.get(p.id);
  if (!outcome) {
    outcome = h('span', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
    outcomes.set(p.id, outcome);
  }
  const act = (action) => async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    outcome.className = 'outcome';
    outcome.textContent = '';
    try {
      const answer = await call('POST', `/mcp/providers/${encodeURIComponent(p.id)}/${action}`, {});
      outcome.className = 'outcome ok';
      outcome.textContent = answer.data && answer.data.status ? stateText(answer.data.status.state) : t(action);
    } catch (err) {
      outcome.className = 'outcome error';
      outcome.dataset.code = err.code || '';
      outcome.textContent = t('action_failed', { action: t(action), msg: err.message });
    } finally {
      button.disabled = false;
    }
  };
  const running = p.state === 'ready' || p.state === 'starting';
  return h('div', { class: 'row' },
    running ? null : h('button', { type: 'button', 'data-act': 'start', onclick: act('start') }, t('start')),
    running ? h('button', { type: 'button', 'data-act': 'stop', onclick: act('stop') }, t('stop')) : null,
    h('button', { type: 'button', 'data-act': 'restart', onclick: act('restart') }, t('restart')),
    h('button', { type: 'button', 'data-act': 'logs', onclick: () => ctx.openLog('mcp/providers', { id: p.id, name: p.id }) }, t('logs')),
    ...loginActions(p, outcome),
    outcome);
}

export async function diagnosticsView(main) {
  const catalog = await get('/catalog');
  const diagnostics = catalog.diagnostics || [];
  replace(main, h('h1', null, t('diagnostics_title')),
    diagnostics.length ? h('div', { class: 'stack' }, diagnostics.map((d) => h('article', { class: `card diag sev-${d.severity}` },
      h('header', { class: 'row' }, h('h2', null, h('code', null, d.path)),
        h('span', { class: `badge sev-${d.severity}` }, t(`severity_${d.severity}`)), d.id ? h('code', null, d.id) : null),
      h('ul', null, (d.errors || []).map((e) => h('li', null, h('code', null, e.pointer || '/'), ' ', e.message))))))
      : h('p', { class: 'muted empty' }, t('diagnostics_empty')));
}
