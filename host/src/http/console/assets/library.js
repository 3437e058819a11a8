// The card library: every card by kind (cards.list, no query needed) or a search over
// every card (cards.search, includeInactive), with suspended and archived cards clearly
// marked — a suspended card says why (which check failed, or the conflict). A card opens
// (cards.inspect) with its body, checks, evidence and history; the owner edits or archives
// it from there (cards.edit, cards.archive: one request each, never retried).

import { freshKey, pipeline } from './api.js';
import { h, modal, replace, when } from './dom.js';
import { t } from './i18n.js';
import { renderMarkdown } from './md.js';
import { checksBlock, evidenceBlock } from './review.js';

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
    await showResults(results, query.value.trim(), kind.value, run);
  };
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    run().catch((e) => replace(results, h('p', { class: 'error' }, t('load_failed', { msg: e.message }))));
  });
  kind.addEventListener('change', () => form.requestSubmit());
  replace(main, h('h1', null, t('library_title')), form, results);
  await run();
}

/** `reload` shows the results again (after a card was changed). */
async function showResults(results, query, kind, reload) {
  const item = (card) => cardItem(card, reload);
  if (!query) {
    await showList(results, kind, item);
    return;
  }
  const data = await pipeline('cards.search', { query, limit: LIMIT, includeInactive: true });
  const cards = (data.cards || []).filter((c) => !kind || c.kind === kind);
  replace(results, cards.length ? cards.map(item) : h('p', { class: 'muted' }, t('no_cards')),
    (data.cards || []).length >= LIMIT ? h('p', { class: 'muted' }, t('more_results', { n: LIMIT })) : null);
}

/** Every card of `kind` (all kinds when empty), a page at a time. */
async function showList(results, kind, item) {
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
    cards.forEach((card) => list.append(item(card)));
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

function cardItem(card, reload) {
  const inactive = card.status && card.status !== 'active';
  // cards.list and cards.search say why a card is held: suspended: {reasons}.
  const held = Boolean(card.suspended);
  const state = inactive ? card.status : held ? 'suspended' : 'active';
  const reasons = held && Array.isArray(card.suspended.reasons) ? card.suspended.reasons : [];
  return h('article', { class: `card libcard state-${state}`, 'data-card': card.id, 'data-state': state },
    h('header', { class: 'row' },
      h('span', { class: 'badge' }, card.kind || ''),
      h('h2', null, h('button', { type: 'button', class: 'open', 'data-open': card.id,
        onclick: () => openCard(card.id, reload) }, card.title || card.id)),
      state === 'active' ? null : h('span', { class: 'badge warn' }, t(`status_${state}`) || state),
      inactive && held ? h('span', { class: 'badge warn' }, t('status_suspended')) : null),
    h('p', { class: 'summary' }, card.summary || ''),
    h('p', { class: 'meta' }, h('code', null, card.id), ` · ${t('revision')} ${card.revision ?? ''}`,
      card.appliesTo ? ` · ${t('applies_to')}: ${card.appliesTo}` : '',
      card.tags && card.tags.length ? ` · ${card.tags.join(', ')}` : ''),
    held ? heldBlock(reasons) : null);
}

/** Why a card is held: each failed check, or the conflict. */
function heldBlock(reasons) {
  return h('div', { class: 'held' }, h('p', { class: 'conflict' }, t('held_because')),
    reasons.length ? h('ul', { class: 'reasons' }, reasons.map((r) => h('li', null, r)))
      : h('p', { class: 'muted' }, t('held_no_reason')));
}

/** One card in a dialog: what it says, its checks, evidence and history; edit or archive it. */
function openCard(id, onChanged) {
  const body = h('div', { class: 'card-view', 'data-card-view': id }, h('p', { class: 'muted' }, t('loading')));
  const { heading } = modal('details-view card-dialog', 'card-dialog-title', id, t('close'), body);
  const load = async () => {
    try {
      const inspected = await pipeline('cards.inspect', { id }, true);
      heading.textContent = inspected.card.title || id;
      replace(body, cardView(inspected, async (message) => {
        await load();
        body.prepend(h('p', { class: 'outcome ok', role: 'status' }, message));
        onChanged().catch(() => {});
      }));
    } catch (e) {
      replace(body, h('p', { class: 'error' }, t('load_failed', { msg: `${e.message} (${e.code})` })));
    }
  };
  load();
}

function cardView(inspected, changed) {
  const c = inspected.card;
  const held = inspected.suspended;
  const state = c.status !== 'active' ? c.status : held ? 'suspended' : 'active';
  const outcome = h('p', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
  const actions = h('div', { class: 'row card-actions' });
  const view = h('div', { class: 'stack', 'data-state': state },
    h('p', { class: 'meta' }, h('span', { class: 'badge' }, c.kind), ' ',
      state === 'active' ? null : h('span', { class: 'badge warn' }, t(`status_${state}`)), ' ',
      h('code', null, c.id), ` · ${t('revision')} `, h('span', { 'data-revision': '' }, String(c.revision)),
      c.updatedAt ? ` · ${when(c.updatedAt)}` : ''),
    h('p', { class: 'summary' }, c.summary),
    c.appliesTo ? h('p', { class: 'meta' }, `${t('applies_to')}: `, c.appliesTo) : null,
    c.tags && c.tags.length ? h('p', { class: 'meta' }, `${t('tags')}: `, c.tags.join(', ')) : null,
    h('section', { class: 'card-body' }, renderMarkdown(c.body || '')),
    held ? heldBlock(held.reasons || []) : null,
    checksBlock(inspected.checks || []),
    evidenceBlock(inspected.evidence || []),
    historyBlock(inspected.history || []),
    (inspected.pending || []).length ? h('p', { class: 'meta pending' }, t('card_pending', { n: inspected.pending.length })) : null,
    actions, outcome);
  if (c.status === 'active') {
    const edit = h('button', { type: 'button', 'data-act': 'edit' }, t('card_edit'));
    const archive = h('button', { type: 'button', class: 'danger', 'data-act': 'archive' }, t('card_archive'));
    edit.addEventListener('click', () => replace(actions, editForm(c, outcome, changed, () => replace(actions, edit, archive))));
    archive.addEventListener('click', () => replace(actions, archiveConfirm(c, outcome, changed, () => replace(actions, edit, archive))));
    replace(actions, edit, archive);
  }
  return view;
}

function historyBlock(history) {
  const heading = h('h3', null, t('card_history'));
  if (!history.length) return h('section', { class: 'card-history' }, heading, h('p', { class: 'muted' }, t('card_no_history')));
  return h('section', { class: 'card-history' }, heading,
    h('table', { class: 'history' }, h('thead', null, h('tr', null, ['card_revision', 'card_change', 'card_by', 'decided_when']
      .map((k) => h('th', { scope: 'col' }, t(k))))),
    h('tbody', null, [...history].reverse().map((change) => h('tr', { 'data-history': change.op },
      h('td', null, String(change.revision)),
      h('td', null, t(`op_${change.op}`)),
      h('td', null, t(change.byOwner ? 'card_by_owner' : 'card_by_agent')),
      h('td', null, when(change.decidedAt)))))));
}

/** Sends one change; on failure says why (a stale card: reopen it) and keeps the form. */
async function send(action, args, outcome, changed, buttons) {
  buttons.forEach((b) => { b.disabled = true; });
  outcome.className = 'outcome';
  outcome.textContent = t('saving');
  try {
    const result = await pipeline(action, { ...args, idempotencyKey: freshKey() }, true);
    await changed(t(action === 'cards.edit' ? 'card_saved' : 'card_archived', { rev: result.revision }));
  } catch (e) {
    outcome.className = 'outcome error';
    outcome.dataset.code = e.code || '';
    outcome.textContent = e.code === 'stale_card' ? t('card_stale', { msg: e.message }) : t('failed', { msg: `${e.message} (${e.code})` });
    buttons.forEach((b) => { b.disabled = false; });
  }
}

function editForm(c, outcome, changed, cancel) {
  const field = (name, value, attrs = {}) => {
    const input = h(attrs.multiline ? 'textarea' : 'input', { id: `edit-${name}`, name, maxlength: attrs.max, rows: attrs.multiline ? 12 : null });
    input.value = value;
    return [h('label', { for: `edit-${name}` }, t(`field_${name}`)), input];
  };
  const save = h('button', { type: 'submit', class: 'primary' }, t('save'));
  const back = h('button', { type: 'button', onclick: cancel }, t('cancel'));
  const form = h('form', { class: 'stack card-edit' },
    field('title', c.title, { max: 200 }), field('summary', c.summary, { max: 500 }),
    field('appliesTo', c.appliesTo || '', { max: 500 }), field('tags', (c.tags || []).join(', ')),
    field('body', c.body, { max: 20000, multiline: true }), h('div', { class: 'row end' }, back, save));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const value = (name) => form.elements[name].value;
    const card = { kind: c.kind, title: value('title').trim(), summary: value('summary').trim(), body: value('body'),
      appliesTo: value('appliesTo').trim(), tags: value('tags').split(',').map((tag) => tag.trim()).filter(Boolean),
      related: c.related || [] };
    send('cards.edit', { id: c.id, revision: c.revision, contentHash: c.contentHash, card }, outcome, changed, [save, back]);
  });
  return form;
}

function archiveConfirm(c, outcome, changed, cancel) {
  const yes = h('button', { type: 'button', class: 'danger', 'data-act': 'archive-confirm' }, t('card_archive_confirm'));
  const no = h('button', { type: 'button', onclick: cancel }, t('cancel'));
  yes.addEventListener('click', () => send('cards.archive', { id: c.id, revision: c.revision, contentHash: c.contentHash },
    outcome, changed, [yes, no]));
  return [h('span', null, t('card_archive_question')), yes, no];
}
