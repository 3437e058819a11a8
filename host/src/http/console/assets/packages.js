// Packages (#/packages): the Suzu Lives packages imported into the instance, an Import
// form that takes a package's path (checked and recorded, never enabled), and the owner's
// steps on each — enable, disable, remove (every step an owner action, the view drawn
// again after each); then the ChatOS UI Apps plugins the catalog found, each with its
// problems, its backend's state and, per app, its MCP server, prompts and profile.

import { call, get } from './api.js';
import { h, replace } from './dom.js';
import { t } from './i18n.js';

export async function packagesView(main, ctx) {
  const [listed, apps, catalog] = await Promise.all([get('/capabilities'), get('/apps'), get('/catalog')]);
  const packages = listed.capabilities || [];
  const again = () => packagesView(main, ctx);
  replace(main, h('h1', null, t('packages_title')),
    h('p', { class: 'muted' }, t('packages_hint')),
    importForm(again),
    h('h2', null, t('packages_imported')),
    packages.length ? h('div', { class: 'table-wrap' }, h('table', null,
      h('thead', null, h('tr', null, [t('package'), t('version'), t('state'), t('adapters'), t('source'), t('actions')]
        .map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, packages.map((p) => h('tr', { 'data-package': p.id },
        h('th', { scope: 'row' }, p.name, h('div', null, h('code', null, p.id))),
        h('td', null, p.version),
        h('td', null, h('span', { class: `badge state-${p.enabled ? 'ready' : 'registered'}` }, p.enabled ? t('enabled') : t('not_enabled'))),
        h('td', null, (p.adapters || []).join(', '), (p.files || []).length ? h('div', { class: 'muted' }, t('skill_files', { n: p.files.length })) : null,
          p.prompt ? h('div', null, t('prompt'), ' ', h('code', null, p.prompt)) : null,
          p.provider ? h('div', null, t('provider'), ' ', h('code', null, p.provider)) : null),
        h('td', null, h('code', null, p.source)),
        h('td', null, packageActions(p, again)))))))
      : h('p', { class: 'muted' }, t('packages_empty')),
    pluginsSection(apps.plugins || [], catalog.diagnostics || []));
  return { watches: [] };
}

/** The ChatOS UI Apps plugins: one card each, its problems (from the catalog) first. */
function pluginsSection(plugins, diagnostics) {
  const problemsOf = (dir) => diagnostics.filter((d) => d.path === `${dir}/plugin.json`).flatMap((d) => d.errors);
  const refused = diagnostics.filter((d) => d.path.endsWith('/plugin.json') && d.severity === 'error');
  return h('section', { id: 'plugins' },
    h('h2', null, t('plugins_title')),
    h('p', { class: 'muted' }, t('plugins_hint')),
    plugins.length || refused.length ? null : h('p', { class: 'muted' }, t('plugins_empty')),
    refused.map((d) => h('div', { class: 'card', 'data-plugin-refused': d.path },
      h('h3', null, h('code', null, d.path), ' ', h('span', { class: 'badge state-failed' }, t('plugin_refused'))),
      problemList(d.errors))),
    plugins.map((p) => {
      const problems = problemsOf(p.dir);
      const backend = p.backend
        ? h('p', null, t('plugin_backend'), ' ', h('code', null, p.backend.entry || '—'), ' ',
          h('span', { class: `badge state-${p.backend.state === 'available' ? 'ready' : 'failed'}` },
            t(`backend_${p.backend.state}`)),
          p.backend.reason ? h('span', { class: 'muted' }, ` ${p.backend.reason}`) : null)
        : null;
      return h('div', { class: 'card', 'data-plugin': p.id },
        h('h3', null, p.name, ' ', h('code', null, p.id), ' ', h('span', { class: 'muted' }, p.version),
          problems.length ? ' ' : null, problems.length ? h('span', { class: 'badge state-unhealthy' }, t('plugin_problems', { n: problems.length })) : null),
        p.description ? h('p', null, p.description) : null,
        h('p', { class: 'muted' }, h('code', null, p.dir)),
        problems.length ? problemList(problems) : null,
        backend,
        h('div', { class: 'table-wrap' }, h('table', null,
          h('thead', null, h('tr', null, [t('app'), t('mcp_server'), t('prompts'), t('profile')]
            .map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', null, p.apps.map((a) => h('tr', { 'data-app': a.id },
            h('th', { scope: 'row' }, a.name, h('div', null, h('code', null, a.id))),
            h('td', null, a.server
              ? [h('code', null, a.server.provider), h('div', { class: 'muted' },
                `${a.server.transport}${a.server.url ? ` ${a.server.url}` : ''} · ${a.server.namespace}__*`,
                a.server.allowMain ? '' : ` · ${t('not_on_main')}`, a.server.allowSub ? '' : ` · ${t('not_on_sub')}`)]
              : '—'),
            h('td', null, a.prompts.length ? a.prompts.map((n) => h('div', null, h('code', null, n))) : '—'),
            h('td', null, h('code', null, a.profile))))))));
    }));
}

function problemList(errors) {
  return h('ul', { class: 'problems' }, errors.map((e) => h('li', null, e.pointer ? h('code', null, e.pointer) : null,
    e.pointer ? ' ' : null, e.message)));
}

/** The Import form: a path, whether to update, and the answer — every problem when refused. */
function importForm(again) {
  const path = h('input', { type: 'text', id: 'import-path', name: 'path', required: true, autocomplete: 'off',
    placeholder: '/home/me/local-weather', class: 'url' });
  const update = h('input', { type: 'checkbox', id: 'import-update', name: 'update' });
  const outcome = h('div', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', 'data-act': 'import' }, t('import'));
  const form = h('form', { class: 'card', id: 'import-form' },
    h('label', { for: 'import-path' }, t('import_path')),
    h('div', { class: 'row' }, path, submit),
    h('div', { class: 'row' }, update, h('label', { for: 'import-update' }, t('import_update'))),
    outcome);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    submit.disabled = true;
    outcome.className = 'outcome';
    replace(outcome, t('importing'));
    try {
      const answer = await call('POST', '/imports', { path: path.value.trim(), update: update.checked }, { owner: true });
      const { record, outcome: done, differences } = answer.data;
      outcome.className = 'outcome ok';
      replace(outcome, t(`import_${done}`, { id: record.id, version: record.version }),
        differences.length ? h('ul', null, differences.map((d) => h('li', null, h('code', null, d)))) : null);
      setTimeout(again, 1500);
    } catch (err) {
      outcome.className = 'outcome error';
      outcome.dataset.code = err.code || '';
      const details = err.details || {};
      replace(outcome, t('import_failed', { msg: err.message }),
        (details.problems || []).length ? h('ul', null, details.problems.map((p) => h('li', null,
          h('code', null, p.pointer ? `${p.file} ${p.pointer}` : p.file), ` [${p.rule}] ${p.message}`))) : null,
        (details.differences || []).length ? h('ul', null, details.differences.map((d) => h('li', null, h('code', null, d)))) : null);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

function packageActions(p, again) {
  const outcome = h('span', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
  const act = (action) => async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    try {
      await call('POST', `/capabilities/${encodeURIComponent(p.id)}/${action}`, {}, { owner: true });
      await again();
    } catch (err) {
      outcome.className = 'outcome error';
      outcome.dataset.code = err.code || '';
      outcome.textContent = t('action_failed', { action: t(action), msg: err.message });
      button.disabled = false;
    }
  };
  return h('div', { class: 'row' },
    p.enabled ? h('button', { type: 'button', 'data-act': 'disable', onclick: act('disable') }, t('disable'))
      : h('button', { type: 'button', 'data-act': 'enable', onclick: act('enable') }, t('enable')),
    p.enabled ? null : h('button', { type: 'button', 'data-act': 'remove', onclick: act('remove') }, t('remove')),
    outcome);
}
