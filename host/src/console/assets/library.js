// The card library: search over every card (includeInactive), a kind filter, and
// suspended or archived cards clearly marked.

import { get, pipeline } from './api.js';
import { h, replace, when } from './dom.js';
import { t } from './i18n.js';

const KINDS = ['rule', 'knowledge', 'profile'];
const LIMIT = 100;

export async function libraryView(main, ctx) {
  const query = h('input', { type: 'search', id: 'card-query', value: ctx.state.libraryQuery || '', maxlength: 200 });
  const kind = h('select', { id: 'card-kind' },
    h('option', { value: '' }, t('all_kinds')), KINDS.map((k) => h('option', { value: k }, k)));
  kind.value = ctx.state.libraryKind || '';
  const results = h('div', { class: 'stack', id: 'card-results' });
  const form = h('form', { class: 'row toolbar', role: 'search' },
    h('label', { for: 'card-query' }, t('search_cards')), query,
    h('label', { for: 'card-kind' }, t('kind')), kind,
    h('button', { type: 'submit' }, t('search')));
  const run = async () => {
    ctx.state.libraryQuery = query.value;
    ctx.state.libraryKind = kind.value;
    await showResults(results, query.value.trim(), kind.value);
  };
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    run().catch((e) => replace(results, h('p', { class: 'error' }, t('load_failed', { msg: e.message }))));
  });
  kind.addEventListener('change', () => form.requestSubmit());
  replace(main, h('h1', null, t('library_title')), form, results);
  await showResults(results, query.value.trim(), kind.value);
}

async function showResults(results, query, kind) {
  if (!query) {
    const report = await get('/faculties/cards/reports/library').catch(() => ({ items: [] }));
    replace(results, h('p', { class: 'muted' }, t('library_hint')), h('h2', null, t('library_recent')),
      h('ul', { class: 'timeline' }, (report.items || []).map((item) => h('li', null,
        h('strong', null, item.title || ''), item.preview ? ` — ${item.preview}` : '',
        item.at ? h('span', { class: 'muted' }, ` · ${when(item.at)}`) : null))));
    return;
  }
  const data = await pipeline('cards.search', { query, limit: LIMIT, includeInactive: true });
  const cards = (data.cards || []).filter((c) => !kind || c.kind === kind);
  replace(results, cards.length ? cards.map(cardItem) : h('p', { class: 'muted' }, t('no_cards')),
    (data.cards || []).length >= LIMIT ? h('p', { class: 'muted' }, t('more_results', { n: LIMIT })) : null);
}

function cardItem(card) {
  const inactive = card.status && card.status !== 'active';
  const state = card.suspended ? 'suspended' : inactive ? card.status : 'active';
  return h('article', { class: `card libcard state-${state}`, 'data-card': card.id },
    h('header', { class: 'row' },
      h('span', { class: 'badge' }, card.kind || ''),
      h('h2', null, card.title || card.id),
      state === 'active' ? null : h('span', { class: `badge warn` }, t(`status_${state}`) || state)),
    h('p', { class: 'summary' }, card.summary || ''),
    h('p', { class: 'meta' }, h('code', null, card.id), ` · ${t('revision')} ${card.revision ?? ''}`,
      card.appliesTo ? ` · ${t('applies_to')}: ${card.appliesTo}` : '',
      card.tags && card.tags.length ? ` · ${card.tags.join(', ')}` : ''),
    card.reason ? h('p', { class: 'conflict' }, card.reason) : null);
}
