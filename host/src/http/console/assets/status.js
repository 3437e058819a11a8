// MCP status (providers, tools, rejected names, conflicts, errors, the URL to paste) and
// catalog diagnostics.

import { get } from './api.js';
import { h, replace } from './dom.js';
import { t } from './i18n.js';

export async function mcpView(main) {
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
      h('thead', null, h('tr', null, [t('provider'), t('namespace'), t('state'), t('tools'), t('rejected_names'), t('errors')].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, providers.map((p) => h('tr', { 'data-provider': p.id },
        h('th', { scope: 'row' }, p.id), h('td', null, h('code', null, p.namespace || '')),
        h('td', null, h('span', { class: `badge state-${p.state}` }, p.state)),
        h('td', null, (p.tools || []).map((name) => [h('code', null, name), ' '])),
        h('td', null, (p.rejected || []).map((r) => h('div', null, h('code', null, r.tool), ` — ${r.reason}`))),
        h('td', null, `${p.errors ?? 0} / ${p.calls ?? 0} ${t('calls')}`, p.lastError ? h('div', { class: 'error' }, p.lastError) : null))))))
      : h('p', { class: 'muted' }, t('none')),
    h('h2', null, t('conflicts')),
    conflicts.length ? h('ul', null, conflicts.map((c) => h('li', null, h('code', null, c.namespace), ` (${c.id}) `, t('held_by', { id: c.heldBy }))))
      : h('p', { class: 'muted' }, t('none')),
    h('h2', null, t('host_tools')),
    h('p', null, ((status.host && status.host.tools) || []).map((name) => [h('code', null, typeof name === 'string' ? name : name.name || ''), ' '])),
    h('p', { class: 'muted' }, `${t('sessions')}: ${typeof status.sessions === 'object' ? JSON.stringify(status.sessions) : status.sessions ?? 0}`));
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
