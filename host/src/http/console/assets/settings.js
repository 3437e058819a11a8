// The Settings view (the owner's alone): the instance's root config as JSON, checked by the
// host itself while it is typed (`POST /config/check`: every problem with its JSON pointer,
// and the fields the running host keeps until a restart), saved whole only when valid
// (`PUT /config`) and in force at once. Nothing here knows the config's fields: the host's
// schema and rules judge, so the view never disagrees with the file's own checks.

import { call } from './api.js';
import { h, replace } from './dom.js';
import { t } from './i18n.js';

/** How long typing pauses before the host is asked. */
const CHECK_AFTER_MS = 300;

export async function settingsView(main) {
  const data = await call('GET', '/config');
  // The file as it is when it does not read as JSON (so a broken file is mended, not replaced).
  let saved = data.document ? JSON.stringify(data.document, null, 2) : (data.text ?? '{}');
  // The file's revision this editor started from: a save is refused once the file changed
  // by another hand, rather than overwriting that edit unseen.
  let revision = data.revision;
  const editor = h('textarea', { id: 'config-editor', class: 'config-editor', spellcheck: 'false', rows: 24,
    'aria-describedby': 'config-verdict' });
  editor.value = saved;
  const verdict = h('div', { id: 'config-verdict', class: 'verdict', 'aria-live': 'polite' });
  const save = h('button', { type: 'button', class: 'primary', 'data-action': 'save-config', disabled: true }, t('settings_save'));
  const revert = h('button', { type: 'button', 'data-action': 'revert-config' }, t('settings_revert'));
  const status = h('p', { id: 'config-status', class: 'muted', role: 'status' });

  const problemList = (problems) => h('ul', { class: 'problems' }, problems.map((p) =>
    h('li', null, h('code', null, p.pointer || '/'), ' ', p.message)));
  function show(problems, waiting) {
    replace(verdict,
      problems.length ? h('div', { class: 'card diag sev-error' }, h('h2', null, t('settings_invalid', { n: problems.length })),
        problemList(problems)) : h('p', { class: 'ok' }, t('settings_valid')),
      waiting.length ? h('p', { class: 'muted waiting' }, t('settings_waiting'), ' ',
        waiting.map((f, i) => [i ? ', ' : '', h('code', null, f)])) : null);
  }

  let seq = 0;
  let timer = null;
  async function check() {
    const mine = ++seq;
    let document;
    try {
      document = JSON.parse(editor.value);
    } catch (e) {
      show([{ pointer: '', message: t('settings_not_json', { msg: e.message }) }], []);
      save.disabled = true;
      return;
    }
    let answer;
    try {
      answer = await call('POST', '/config/check', document, { owner: true });
    } catch (e) {
      const why = e.code === 'owner_required' ? t('settings_owner_only') : e.message;
      answer = { problems: [{ pointer: '', message: why }], waiting: [] };
    }
    if (mine !== seq) return; // a later check is on its way
    show(answer.problems, answer.waiting);
    save.disabled = answer.problems.length > 0 || editor.value === saved;
  }
  editor.addEventListener('input', () => {
    save.disabled = true;
    clearTimeout(timer);
    timer = setTimeout(check, CHECK_AFTER_MS);
  });
  revert.addEventListener('click', () => {
    editor.value = saved;
    status.textContent = '';
    check();
  });
  save.addEventListener('click', async () => {
    save.disabled = true;
    let document;
    try {
      document = JSON.parse(editor.value);
    } catch {
      return check();
    }
    try {
      const headers = revision ? { 'if-match': `"${revision}"` } : {};
      const answer = await call('PUT', '/config', document, { owner: true, headers });
      saved = editor.value;
      revision = (await call('GET', '/config')).revision;
      status.textContent = t('settings_saved');
      show([], answer.waiting || []);
    } catch (e) {
      const problems = (e.details && e.details.problems) || [{ pointer: '', message: e.message }];
      status.textContent = e.code === 'config_changed' ? t('settings_changed') : t('settings_not_saved');
      show(problems, []);
    }
  });

  const current = (data.diagnostics || []).flatMap((d) => (d.errors || []).map((e) => ({ ...e, severity: d.severity })));
  replace(main, h('h1', null, t('settings_title')),
    h('p', { class: 'desc' }, t('settings_intro'), ' ', (data.liveFields || []).map((f, i) => [i ? ', ' : '', h('code', null, f)]),
      '. ', t('settings_restart'), ' ', (data.restartFields || []).map((f, i) => [i ? ', ' : '', h('code', null, f)]), '.'),
    current.length ? h('section', { class: 'card diag', 'aria-labelledby': 'config-now' },
      h('h2', { id: 'config-now' }, t('settings_file_now')), problemList(current)) : null,
    h('label', { for: 'config-editor' }, t('settings_editor')), editor, verdict,
    h('div', { class: 'row actions' }, save, revert), status);
  check();
  return { watches: [] };
}
