// Capability packages (#/packages): the Suzu Lives packages imported into the instance,
// an Import form that takes a package's path (checked and recorded, never enabled), and
// the owner's steps on each — enable, disable, remove. Every step is an owner action, and
// the view is drawn again after each.

import { call, get } from './api.js';
import { h, replace } from './dom.js';
import { t } from './i18n.js';

export async function packagesView(main, ctx) {
  const listed = await get('/capabilities');
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
        h('td', null, (p.adapters || []).join(', '), (p.files || []).length ? h('div', { class: 'muted' }, t('skill_files', { n: p.files.length })) : null),
        h('td', null, h('code', null, p.source)),
        h('td', null, packageActions(p, again)))))))
      : h('p', { class: 'muted' }, t('packages_empty')));
  return { watches: [] };
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
