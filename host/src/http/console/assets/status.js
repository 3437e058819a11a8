// MCP status (providers with their state, tools, rejected and held names, errors, each
// with start / stop / restart and its log; conflicts; the URL to paste) and catalog
// diagnostics. The MCP view is drawn again whenever the events say the hub changed.

import { call, get } from './api.js';
import { h, replace } from './dom.js';
import { t } from './i18n.js';

export async function mcpView(main, ctx) {
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
  replace(main, h('h1', null, t('mcp_title')),
    h('section', { class: 'card' }, h('label', { for: 'mcp-url' }, t('mcp_url')), h('div', { class: 'row' }, field, copy, copied)),
    h('h2', null, t('providers')),
    providers.length ? h('div', { class: 'table-wrap' }, h('table', null,
      h('thead', null, h('tr', null, [t('provider'), t('namespace'), t('state'), t('tools'), t('rejected_names'), t('errors'), t('actions')].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, providers.map((p) => h('tr', { 'data-provider': p.id },
        h('th', { scope: 'row' }, p.id), h('td', null, h('code', null, p.namespace || '')),
        h('td', null, h('span', { class: `badge state-${p.state}` }, p.state)),
        h('td', null, (p.tools || []).map((name) => [h('code', null, name), ' ']),
          (p.held || []).length ? h('div', { class: 'muted' }, `${t('held_count', { n: p.held.length })} `, h('a', { href: '#/review' }, t('nav_review'))) : null),
        h('td', null, (p.rejected || []).map((r) => h('div', null, h('code', null, r.tool), ` — ${r.reason}`))),
        h('td', null, `${p.errors ?? 0} / ${p.calls ?? 0} ${t('calls')}`, p.lastError ? h('div', { class: 'error' }, p.lastError) : null),
        h('td', null, providerActions(p, ctx)))))))
      : h('p', { class: 'muted' }, t('none')),
    h('h2', null, t('conflicts')),
    conflicts.length ? h('ul', null, conflicts.map((c) => h('li', null, h('code', null, c.namespace), ` (${c.id}) `, t('held_by', { id: c.heldBy }))))
      : h('p', { class: 'muted' }, t('none')),
    h('h2', null, t('host_tools')),
    h('p', null, ((status.host && status.host.tools) || []).map((name) => [h('code', null, typeof name === 'string' ? name : name.name || ''), ' '])),
    h('p', { class: 'muted' }, `${t('sessions')}: ${typeof status.sessions === 'object' ? JSON.stringify(status.sessions) : status.sessions ?? 0}`));
}

/** Start, stop, restart (each sent once, the outcome shown) and the log of one provider. */
function providerActions(p, ctx) {
  const outcome = h('span', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
  const act = (action) => async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    outcome.className = 'outcome';
    outcome.textContent = '';
    try {
      const answer = await call('POST', `/mcp/providers/${encodeURIComponent(p.id)}/${action}`, {});
      outcome.className = 'outcome ok';
      outcome.textContent = answer.data && answer.data.status ? answer.data.status.state : action;
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
