// The card library: every card by kind (cards.list, no query needed) or a search over
// every card (cards.search, includeInactive), with suspended and archived cards clearly
// marked — a suspended card says why (which check failed, or the conflict).

import { pipeline } from './api.js';
import { h, replace } from './dom.js';
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
    await showList(results, kind);
    return;
  }
  const data = await pipeline('cards.search', { query, limit: LIMIT, includeInactive: true });
  const cards = (data.cards || []).filter((c) => !kind || c.kind === kind);
  replace(results, cards.length ? cards.map(cardItem) : h('p', { class: 'muted' }, t('no_cards')),
    (data.cards || []).length >= LIMIT ? h('p', { class: 'muted' }, t('more_results', { n: LIMIT })) : null);
}

/** Every card of `kind` (all kinds when empty), a page at a time. */
async function showList(results, kind) {
  const list = h('div', { class: 'stack', id: 'card-list' });
  const count = h('p', { class: 'muted', id: 'card-count' });
  replace(results, h('p', { class: 'muted' }, t('library_hint')), count, list);
  let offset = 0;
  const more = async () => {
    const args = { includeInactive: true, limit: LIMIT, offset };
    if (kind) args.kind = kind;
    const data = await pipeline('cards.list', args);
    const cards = data.cards || [];
    offset += cards.length;
    const total = data.total ?? offset;
    list.querySelector('button.more')?.remove();
    if (!offset) list.append(h('p', { class: 'muted' }, t('no_cards')));
    cards.forEach((card) => list.append(cardItem(card)));
    replace(count, t('library_count', { n: total }));
    if (offset < total && cards.length) {
      const button = h('button', { type: 'button', class: 'more' }, t('show_more', { n: total - offset }));
      button.addEventListener('click', () => more().catch((e) =>
        list.append(h('p', { class: 'error' }, t('load_failed', { msg: e.message })))));
      list.append(button);
    }
  };
  await more();
}

function cardItem(card) {
  const inactive = card.status && card.status !== 'active';
  // cards.list and cards.search say why a card is held: suspended: {reasons}.
  const held = Boolean(card.suspended);
  const state = inactive ? card.status : held ? 'suspended' : 'active';
  const reasons = held && Array.isArray(card.suspended.reasons) ? card.suspended.reasons : [];
  return h('article', { class: `card libcard state-${state}`, 'data-card': card.id, 'data-state': state },
    h('header', { class: 'row' },
      h('span', { class: 'badge' }, card.kind || ''),
      h('h2', null, card.title || card.id),
      state === 'active' ? null : h('span', { class: 'badge warn' }, t(`status_${state}`) || state),
      inactive && held ? h('span', { class: 'badge warn' }, t('status_suspended')) : null),
    h('p', { class: 'summary' }, card.summary || ''),
    h('p', { class: 'meta' }, h('code', null, card.id), ` · ${t('revision')} ${card.revision ?? ''}`,
      card.appliesTo ? ` · ${t('applies_to')}: ${card.appliesTo}` : '',
      card.tags && card.tags.length ? ` · ${card.tags.join(', ')}` : ''),
    held ? h('div', { class: 'held' },
      h('p', { class: 'conflict' }, t('held_because')),
      reasons.length ? h('ul', { class: 'reasons' }, reasons.map((r) => h('li', null, r)))
        : h('p', { class: 'muted' }, t('held_no_reason'))) : null);
}
