// The Butler view: each faculty with its state, its reports rendered by shape (`status`
// a badge with summary and items, `list` a timeline, `markdown` rendered safely) and its
// commands.

import { get } from './api.js';
import { h, replace, when } from './dom.js';
import { t } from './i18n.js';
import { renderMarkdown } from './md.js';
import { icon } from './boards.js';

export async function butlerView(main) {
  const data = await get('/faculties');
  const faculties = data.faculties || [];
  const list = h('div', { class: 'stack' });
  replace(main, h('h1', null, t('butler_title')), list);
  for (const faculty of faculties) {
    const reports = h('div', { class: 'reports' });
    list.append(h('article', { class: 'card faculty', 'data-faculty': faculty.id },
      h('header', { class: 'row' }, icon(faculty), h('h2', null, faculty.name || faculty.id),
        h('span', { class: `badge state state-${faculty.state}` }, faculty.state)),
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
    h('p', null, h('span', { class: `badge report-${status}` }, status), ' ', body.summary || ''),
    (body.items || []).length ? h('ul', null, body.items.map((item) => h('li', null,
      typeof item === 'string' ? item : [item.title || item.label || '', item.detail ? ` — ${item.detail}` : '']))) : null);
}
