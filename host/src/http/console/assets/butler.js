// The Butler view: the host's automations (its scheduled agent jobs: next and last run,
// outcome, log; "Register automations" through the owner gate), the open console sessions
// (each browser logged in, this one marked, each one's "End"), then each faculty with its
// state, its reports rendered by shape (`status` a badge with summary and items, `list` a
// timeline, `markdown` rendered safely) and its commands.

import { call, forgetProof, get, hasProof } from './api.js';
import { h, replace, when } from './dom.js';
import { jobOutcomeText, jobTitle, reportStatusText, stateText, t } from './i18n.js';
import { renderMarkdown } from './md.js';
import { icon } from './boards.js';

export async function butlerView(main) {
  const data = await get('/faculties');
  const faculties = data.faculties || [];
  const list = h('div', { class: 'stack' });
  const automations = h('section', { class: 'card automations', id: 'automations', 'aria-labelledby': 'automations-title' });
  const sessions = h('section', { class: 'card sessions', id: 'sessions', 'aria-labelledby': 'sessions-title' });
  replace(main, h('h1', null, t('butler_title')), automations, sessions, list);
  await Promise.all([showAutomations(automations), showSessions(sessions)]);
  for (const faculty of faculties) {
    const reports = h('div', { class: 'reports' });
    list.append(h('article', { class: 'card faculty', 'data-faculty': faculty.id },
      h('header', { class: 'row' }, icon(faculty), h('h2', null, faculty.name || faculty.id),
        h('span', { class: `badge state state-${faculty.state}` }, stateText(faculty.state))),
      faculty.description ? h('p', { class: 'desc' }, faculty.description) : null,
      faculty.error ? h('p', { class: 'error' }, faculty.error) : null,
      reports,
      (faculty.commands || []).length ? h('details', null, h('summary', null, `${t('commands')} (${faculty.commands.length})`),
        h('ul', null, faculty.commands.map((c) => h('li', null, h('code', null, c.id), ' ',
          h('span', { class: 'badge' }, c.effect || ''), c.description ? ` ${c.description}` : '')))) : null));
    for (const report of faculty.reports || []) {
      const slot = h('section', { class: 'report', 'data-report': report.id, 'data-shape': report.shape || 'status' },
        h('h3', null, report.name || report.id), h('p', { class: 'muted' }, t('loading')));
      reports.append(slot);
      get(`/faculties/${encodeURIComponent(faculty.id)}/reports/${encodeURIComponent(report.id)}`)
        .then((body) => replace(slot, h('h3', null, report.name || report.id), renderReport(report.shape || 'status', body)))
        .catch((e) => replace(slot, h('h3', null, report.name || report.id), h('p', { class: 'error' }, t('report_failed', { msg: e.message }))));
    }
  }
}

/** The scheduled jobs, and the button that registers the host's own. */
async function showAutomations(section) {
  let data;
  try {
    data = await get('/automations');
  } catch (e) {
    return replace(section, h('h2', { id: 'automations-title' }, t('automations_title')), h('p', { class: 'error' }, e.message));
  }
  const outcome = h('p', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
  const register = h('button', { type: 'button', class: 'primary', 'data-act': 'register-automations' }, t('automations_register'));
  register.disabled = !data.agent;
  register.addEventListener('click', async () => {
    register.disabled = true;
    try {
      const done = await call('POST', '/automations', {}, { owner: true });
      outcome.className = 'outcome ok';
      outcome.textContent = t('automations_registered', { added: done.added.length, replaced: done.replaced.length,
        kept: done.kept.length, removed: done.removed.length });
      await showAutomations(section);
      section.append(outcome);
    } catch (e) {
      outcome.className = 'outcome error';
      outcome.dataset.code = e.code || '';
      outcome.textContent = t('failed', { msg: `${e.message} (${e.code})` });
      register.disabled = false;
    }
  });
  const jobs = data.jobs || [];
  replace(section,
    h('header', { class: 'row' }, h('h2', { id: 'automations-title' }, t('automations_title')), register),
    h('p', { class: 'muted' }, data.agent ? t('automations_hint', { tz: data.timeZone }) : t('automations_no_agent')),
    jobs.length ? h('table', { class: 'jobs' },
      h('thead', null, h('tr', null, ['automations_job', 'automations_schedule', 'automations_next', 'automations_last']
        .map((k) => h('th', null, t(k))))),
      h('tbody', null, jobs.map((job) => {
        const last = job.last;
        return h('tr', { 'data-job': job.title },
          // The host's own jobs titled in the console's language; the registered title on hover.
          h('td', { title: job.title, 'data-title': '' }, jobTitle(job.title)),
          h('td', null, h('code', null, job.schedule), ` (${job.timeZone})`),
          h('td', null, job.running ? t('automations_running') : job.nextRun ? when(job.nextRun) : '—'),
          h('td', null, last ? [h('span', { class: `badge outcome-${last.outcome}` }, jobOutcomeText(last.outcome)), ' ', when(last.startedAt),
            last.error ? h('p', { class: 'error' }, last.error) : null,
            last.result && last.result.summary ? h('p', { class: 'muted' }, last.result.summary) : null,
            job.log ? h('p', { class: 'muted' }, h('code', null, job.log)) : null] : '—'));
      }))) : h('p', { class: 'muted empty' }, t('automations_none')));
}

/** The open console sessions, each with its "End"; ending this one logs this page out. */
async function showSessions(section, note = null) {
  const title = h('h2', { id: 'sessions-title' }, t('sessions_title'));
  const hint = h('p', { class: 'muted' }, t('sessions_hint', { idle: 12, days: 7 }));
  if (!hasProof()) return replace(section, title, h('p', { class: 'muted', 'data-sessions': 'login' }, t('sessions_need_login')));
  let data;
  try {
    data = (await call('POST', '/console/sessions', {}, { owner: true })).data;
  } catch (e) {
    const text = e.code === 'owner_required' ? t('sessions_need_login') : t('failed', { msg: `${e.message} (${e.code})` });
    return replace(section, title, h('p', { class: 'error', 'data-sessions': 'failed' }, text));
  }
  const outcome = h('p', { class: 'outcome', role: 'status', 'aria-live': 'polite' }, note);
  const all = data.sessions || [];
  const end = async (session, button) => {
    button.disabled = true;
    try {
      await call('POST', `/console/sessions/${encodeURIComponent(session.id)}/end`, {}, { owner: true });
      if (session.current) {
        loggedOut();
        return;
      }
      await showSessions(section, t('sessions_ended'));
    } catch (e) {
      outcome.className = 'outcome error';
      outcome.textContent = t('failed', { msg: `${e.message} (${e.code})` });
      button.disabled = false;
    }
  };
  replace(section, title, hint,
    all.length ? h('table', { class: 'sessions' },
      h('thead', null, h('tr', null, ['sessions_browser', 'sessions_created', 'sessions_last_used', 'sessions_ends']
        .map((k) => h('th', { scope: 'col' }, t(k))), h('td', null))),
      h('tbody', null, all.map((session) => {
        const button = h('button', { type: 'button', 'data-act': 'end-session' }, t('sessions_end'));
        button.addEventListener('click', () => end(session, button));
        return h('tr', { 'data-session': session.id, 'data-current': session.current ? 'true' : null },
          h('td', null, session.agent, session.current ? [' ', h('span', { class: 'badge', 'data-this-session': '' }, t('sessions_this'))] : null),
          h('td', null, when(session.createdAt)), h('td', null, when(session.lastUsedAt)), h('td', null, when(session.expiresAt)),
          h('td', null, button));
      }))) : h('p', { class: 'muted empty' }, t('sessions_none')),
    outcome);
}

/** This page's session is over: its proof forgotten, the page says how to log in again. */
export function loggedOut() {
  forgetProof();
  const button = document.getElementById('logout');
  if (button) button.hidden = true;
  document.body.dataset.loggedOut = 'true';
  replace(document.getElementById('main'), h('p', { class: 'outcome ok', 'data-logged-out': '' }, t('logged_out')));
}

export function renderReport(shape, body) {
  if (shape === 'markdown') return renderMarkdown(body.markdown || '');
  if (shape === 'list') {
    if (!(body.items || []).length) return h('p', { class: 'muted empty' }, t('report_list_empty'));
    return h('ol', { class: 'timeline' }, (body.items || []).map((item) => h('li', null,
      item.at ? h('time', { class: 'muted' }, when(item.at)) : null, ' ', h('strong', null, item.title || ''),
      item.preview ? h('p', null, item.preview) : null)));
  }
  const status = String(body.status || 'unknown');
  return h('div', { class: 'status-report' },
    h('p', null, h('span', { class: `badge report-${status}` }, reportStatusText(status)), ' ', body.summary || ''),
    (body.items || []).length ? h('ul', null, body.items.map((item) => h('li', null,
      typeof item === 'string' ? item : [item.title || item.label || '', item.detail ? ` — ${item.detail}` : '']))) : null);
}
