// The review queue (default view): each pending candidate with its card, a diff against
// the current card, evidence, checks and conflict; approve or reject through the owner
// gate. A decision is sent once: a failure is shown and the candidate stays put. Beside
// them, the delegations' results awaiting confirmation: confirm or reject each (the
// extension that delegated gets the result only when confirmed). Below them, what the MCP
// quarantine holds — tools, prompts, resources, resource templates, skills — each with its
// definition (and, when it changed, the diff against the one approved): approve it, approve
// everything its provider holds at once (the list of what that approves shown beside the
// button), or trust its provider wholesale. Last,
// the history of decided candidates: approved or rejected, when, and why.

import { call, freshKey, get, pipeline } from './api.js';
import { h, replace, when } from './dom.js';
import { t } from './i18n.js';
import { renderMarkdown } from './md.js';

export async function reviewView(main, ctx) {
  const list = h('div', { class: 'stack', id: 'queue' });
  const count = h('span', { class: 'count' });
  const empty = h('p', { class: 'muted empty' }, t('review_empty'));
  const shown = new Map(); // id → its article, kept across refreshes (a typed reason survives)
  // What the nav's badge counts: candidates, confirmations and held MCP items.
  const pending = { cards: 0, runs: 0, held: 0, logins: 0 };
  const setPending = () => {
    const total = pending.cards + pending.runs + pending.held + pending.logins;
    ctx.setPending(total);
    count.textContent = String(total);
    count.hidden = total === 0;
    // "Nothing awaits review" only when nothing does: no candidate, confirmation or held
    // item (those decided here stay on screen, with their outcome, above it).
    if (total === 0 && !empty.isConnected) list.append(empty);
    else if (total > 0) empty.remove();
  };
  const history = h('section', { class: 'stack', id: 'decided', 'aria-labelledby': 'decided-title' });
  const refresh = async () => {
    const data = await pipeline('review.list', {});
    const candidates = (data.candidates || []).filter((c) => c.status === 'pending' || c.status === 'applying');
    showHistory(history, (data.candidates || []).filter((c) => c.status === 'approved' || c.status === 'rejected'));
    const waiting = new Set(candidates.map((c) => c.id));
    pending.cards = candidates.length;
    setPending();
    // Cards decided here, or whose decision failed, stay with their outcome until the view is left.
    for (const [id, article] of shown) {
      if (!waiting.has(id) && article.dataset.keep !== 'true') {
        article.remove();
        shown.delete(id);
      }
    }
    for (const candidate of candidates) {
      const known = shown.get(candidate.id);
      if (known && known.dataset.revision === String(candidate.revision)) continue;
      const article = candidateCard(candidate, ctx);
      if (known) known.replaceWith(article);
      else list.append(article);
      shown.set(candidate.id, article);
    }
    setPending();
  };
  const held = h('section', { class: 'stack', id: 'held-tools', 'aria-labelledby': 'held-title' });
  // Approved here: kept on screen, with the outcome, until the view is left.
  const decided = new Map();
  const refreshHeld = async () => {
    let report;
    try {
      report = await get('/mcp/quarantine');
    } catch {
      return; // the hub's quarantine is optional in this view
    }
    const tools = report.enabled ? report.held || [] : [];
    pending.held = tools.length;
    // A card or provider approved here stays, with its outcome, while nothing of it is held again.
    const kept = [...decided].filter(([key]) => !tools.some((tool) => key === tool.public || key === `provider:${tool.provider}`))
      .map(([, element]) => element);
    if (!tools.length && !kept.length) {
      held.replaceChildren();
      setPending();
      return;
    }
    const providers = new Map(); // provider → its held items, in the quarantine's order
    for (const tool of tools) {
      if (!providers.has(tool.provider)) providers.set(tool.provider, []);
      providers.get(tool.provider).push(tool);
    }
    const onDecided = (key, element) => decided.set(key, element);
    held.replaceChildren(h('h2', { id: 'held-title' }, t('held_title'), ' ', h('span', { class: 'count' }, String(tools.length))),
      h('p', { class: 'muted' }, t('held_hint')),
      ...[...providers].map(([provider, items]) => heldProvider(provider, items, refreshHeld, onDecided)), ...kept);
    setPending();
  };
  // The held tools show even where no faculty serves the cards' queue.
  const refreshCards = async () => {
    try {
      await refresh();
    } catch (e) {
      list.replaceChildren(h('p', { class: 'error' }, t('load_failed', { msg: `${e.message} (${e.code})` })));
    }
  };
  const runs = h('section', { class: 'stack', id: 'confirmations', 'aria-labelledby': 'confirm-title' });
  const runCards = new Map(); // run id → its article, kept across refreshes (and once decided, until the view is left)
  const refreshRuns = async () => {
    let waiting;
    try {
      waiting = ((await get('/runs')).runs || []).filter((r) => r.status === 'awaiting_confirmation');
    } catch {
      return; // delegations are optional in this view
    }
    pending.runs = waiting.length;
    setPending();
    for (const run of waiting) {
      if (runCards.has(run.id)) continue;
      try {
        runCards.set(run.id, runCard(await get(`/runs/${encodeURIComponent(run.id)}`), refreshRuns));
      } catch {
        /* decided or pruned meanwhile: the next refresh tells */
      }
    }
    for (const [id, article] of runCards) {
      if (!waiting.some((r) => r.id === id) && article.dataset.keep !== 'true') runCards.delete(id);
    }
    if (!runCards.size) {
      runs.replaceChildren();
      return setPending();
    }
    setPending();
    runs.replaceChildren(h('h2', { id: 'confirm-title' }, t('confirm_title'), ' ', h('span', { class: 'count' }, String(waiting.length))),
      h('p', { class: 'muted' }, t('confirm_hint')), ...runCards.values());
  };
  // Remote servers whose login must be given (again): connected from the MCP view.
  const logins = h('section', { class: 'stack', id: 'logins', 'aria-labelledby': 'logins-title' });
  const refreshLogins = async () => {
    let needed;
    try {
      needed = ((await get('/mcp/status')).providers || []).filter((p) => p.login && p.login.state === 'needed');
    } catch {
      return; // the hub's status is optional in this view
    }
    pending.logins = needed.length;
    setPending();
    if (!needed.length) return logins.replaceChildren();
    logins.replaceChildren(h('h2', { id: 'logins-title' }, t('logins_title'), ' ', h('span', { class: 'count' }, String(needed.length))),
      ...needed.map((p) => h('article', { class: 'card login', 'data-login-needed': p.id },
        h('h3', null, p.id),
        h('p', null, p.login.reason || ''),
        h('p', null, h('a', { href: '#/mcp' }, t('logins_connect'))))));
  };
  replace(main, h('h1', null, t('review_title'), ' ', count), list, runs, logins, held, history);
  const all = () => Promise.all([refreshCards(), refreshRuns(), refreshHeld(), refreshLogins()]);
  await all();
  return { refresh: all };
}

/** The decided candidates, newest decision first: what, approved or rejected, when, why. */
function showHistory(section, decided) {
  if (!decided.length) return section.replaceChildren();
  const at = (c) => Date.parse(c.decidedAt || c.createdAt || '') || 0;
  const rows = [...decided].sort((a, b) => at(b) - at(a)).slice(0, HISTORY_SHOWN).map((c) => h('tr', { 'data-decided': c.id },
    h('td', null, (c.card && c.card.title) || c.id),
    h('td', null, h('span', { class: `badge decided-${c.status}` }, t(c.byOwner ? 'decided_owner' : `decided_${c.status}`))),
    h('td', null, c.decidedAt ? when(Date.parse(c.decidedAt)) : '—'),
    h('td', null, c.reason || '')));
  replace(section, h('h2', { id: 'decided-title' }, t('decided_title')),
    h('table', { class: 'history' }, h('thead', null, h('tr', null, ['decided_card', 'decided_outcome', 'decided_when', 'decided_reason']
      .map((k) => h('th', { scope: 'col' }, t(k))))), h('tbody', null, rows)));
}

/** How many decided candidates the history shows. */
const HISTORY_SHOWN = 50;

/** A delegation's result awaiting the owner: what the agent proposed, confirm or reject. */
function runCard(run, refreshRuns) {
  const step = (run.steps || [])[0] || {};
  const outcome = h('p', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
  const reason = h('input', { type: 'text', id: `reason-${run.id}`, class: 'reason', maxlength: 500 });
  reason.placeholder = t('reject_reason');
  const confirm = h('button', { type: 'button', class: 'primary', 'data-act': 'confirm-run' }, t('confirm_run'));
  const reject = h('button', { type: 'button', class: 'danger', 'data-act': 'reject-run' }, t('reject'));
  const article = h('article', { class: 'card confirmation', 'data-run': run.id, 'aria-labelledby': `title-${run.id}` },
    h('header', { class: 'row' },
      h('span', { class: 'badge' }, t('delegation')),
      h('h3', { id: `title-${run.id}` }, `${run.extension} / ${run.delegation}`)),
    h('p', { class: 'meta', 'data-proposed': '' }, `${t('proposed_at')}: `, proposedAt(step.endedAt || run.updatedAt), ' · ', run.id),
    h('pre', { class: 'result' }, JSON.stringify(step.result, null, 2)),
    h('div', { class: 'decide row' },
      confirm,
      h('label', { for: `reason-${run.id}`, class: 'sr' }, t('reject_reason')),
      reason,
      reject),
    outcome);
  const decide = async (decision) => {
    confirm.disabled = true;
    reject.disabled = true;
    const body = decision === 'reject' && reason.value.trim() ? { reason: reason.value.trim() } : {};
    try {
      await call('POST', `/runs/${encodeURIComponent(run.id)}/steps/0/${decision}`, body, { owner: true });
      article.dataset.keep = 'true';
      outcome.className = 'outcome ok';
      outcome.textContent = t(decision === 'confirm' ? 'run_confirmed' : 'run_rejected');
      setTimeout(refreshRuns, 800);
    } catch (e) {
      outcome.className = 'outcome error';
      outcome.dataset.code = e.code || '';
      outcome.textContent = t('failed', { msg: `${e.message} (${e.code})` });
      confirm.disabled = false;
      reject.disabled = false;
    }
  };
  confirm.addEventListener('click', () => decide('confirm'));
  reject.addEventListener('click', () => decide('reject'));
  return article;
}

/** When a delegation's result was proposed, in the browser's local time (as every date here). */
function proposedAt(at) {
  return at ? h('time', { datetime: at }, when(at)) : '—';
}

/** What an approval names of a held item: its kind, its own key and the sha256 shown. */
function approvalItem(tool) {
  return { kind: tool.kind || 'tool', name: tool.name || tool.tool, sha256: tool.sha256 };
}

/** Sends one approval (once, never retried): `buttons` are disabled meanwhile, `outcome` says how it went. */
async function sendApproval(body, buttons, outcome) {
  for (const button of buttons) button.disabled = true;
  try {
    // The sha256 of each item shown: a definition that changed since is refused, not approved unseen.
    await call('POST', '/mcp/quarantine/approve', body, { owner: true });
    outcome.className = 'outcome ok';
    outcome.textContent = t('held_approved');
    return true;
  } catch (e) {
    outcome.className = 'outcome error';
    outcome.dataset.code = e.code || '';
    outcome.textContent = t('failed', { msg: `${e.message} (${e.code})` });
    for (const button of buttons) button.disabled = false;
    return false;
  }
}

/**
 * One provider's held items: "approve all of PROVIDER" with the list of exactly what it
 * approves (each item with the definition shown below), "trust it wholesale", then a card
 * per item.
 */
function heldProvider(provider, items, refreshHeld, onDecided) {
  const outcome = h('p', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
  const approveAll = h('button', { type: 'button', class: 'primary', 'data-act': 'approve-provider' },
    t('approve_all', { id: provider, n: items.length }));
  const trust = h('button', { type: 'button', 'data-act': 'trust' }, t('trust_provider', { id: provider }));
  const section = h('section', { class: 'held-provider', 'data-held-provider': provider, 'aria-labelledby': `held-${provider}` },
    h('header', { class: 'row' }, h('h3', { id: `held-${provider}` }, provider),
      h('span', { class: 'badge' }, t('held_of_provider', { n: items.length }))),
    h('p', { class: 'muted' }, t('approve_all_lists', { id: provider })),
    h('ul', { class: 'approves' }, items.map((tool) => h('li', { 'data-approves': tool.public },
      h('span', { class: 'badge' }, t(`held_kind_${tool.kind || 'tool'}`)), ' ', h('code', null, tool.public)))),
    h('div', { class: 'decide row' }, approveAll, trust),
    outcome,
    ...items.map((tool) => heldCard(tool, refreshHeld, onDecided)));
  const decide = async (body) => {
    if (await sendApproval(body, [approveAll, trust], outcome)) {
      onDecided(`provider:${provider}`, section);
      setTimeout(refreshHeld, 800);
    }
  };
  // Exactly the items listed, each with the sha256 shown.
  approveAll.addEventListener('click', () => decide({ provider, items: items.map(approvalItem) }));
  trust.addEventListener('click', () => decide({ provider, tools: [], trust: true }));
  return section;
}

function heldCard(tool, refreshHeld, onDecided) {
  const outcome = h('p', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
  const kind = tool.kind || 'tool';
  const approve = h('button', { type: 'button', class: 'primary', 'data-act': 'approve-tool' }, t('approve_tool'));
  const now = JSON.stringify(tool.definition, null, 2);
  const before = tool.approved ? JSON.stringify(tool.approved.definition, null, 2) : null;
  const article = h('article', { class: 'card held-tool', 'data-tool': tool.public, 'data-kind': kind },
    h('header', { class: 'row' },
      h('span', { class: 'badge' }, t(`held_kind_${kind}`)),
      h('span', { class: 'badge' }, t(tool.reason === 'changed' ? 'held_changed' : 'held_new')),
      h('h3', null, tool.public)),
    h('p', { class: 'summary' }, (tool.definition && tool.definition.description) || ''),
    before === null
      ? h('details', null, h('summary', null, t('definition')), h('pre', { class: 'diffview' }, now))
      : h('section', { class: 'diff' }, h('h4', null, t('definition_diff')), lineDiff(before, now)),
    h('div', { class: 'decide row' }, approve),
    outcome);
  approve.addEventListener('click', async () => {
    if (await sendApproval({ provider: tool.provider, items: [approvalItem(tool)] }, [approve], outcome)) {
      onDecided(tool.public, article);
      setTimeout(refreshHeld, 800);
    }
  });
  return article;
}

function candidateCard(c, ctx) {
  const card = c.card || {};
  const outcome = h('p', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
  const reason = h('input', { type: 'text', id: `reason-${c.id}`, class: 'reason', maxlength: 500 });
  const approve = h('button', { type: 'button', class: 'primary', 'data-act': 'approve' }, t('approve'));
  const reject = h('button', { type: 'button', class: 'danger', 'data-act': 'reject' }, t('reject'));
  const article = h('article', { class: 'candidate card', 'data-candidate': c.id, 'data-revision': c.revision,
    'aria-labelledby': `title-${c.id}` },
    h('header', { class: 'row' },
      h('span', { class: `badge op-${c.op}` }, t(`op_${c.op}`), c.target ? ` ${c.target}` : ''),
      h('span', { class: 'badge' }, card.kind || ''),
      h('h2', { id: `title-${c.id}` }, card.title || c.id)),
    h('p', { class: 'summary' }, card.summary || ''),
    card.appliesTo ? h('p', { class: 'meta' }, `${t('applies_to')}: `, card.appliesTo) : null,
    card.tags && card.tags.length ? h('p', { class: 'meta' }, `${t('tags')}: `, card.tags.join(', ')) : null,
    c.op === 'archive' ? null : h('details', { open: true }, h('summary', null, t('body')), renderMarkdown(card.body || '')),
    c.op === 'revise' || c.op === 'archive' ? diffBlock(c) : null,
    c.conflict ? h('p', { class: 'conflict' }, h('strong', null, `${t('conflict')}: `), c.conflict.reason || '') : null,
    checksBlock(c.checks || []),
    evidenceBlock(c.evidence || []),
    h('div', { class: 'decide row' },
      approve,
      h('label', { for: `reason-${c.id}`, class: 'sr' }, t('reject_reason')),
      reason,
      reject),
    outcome);
  reason.placeholder = t('reject_reason');
  const decide = async (verb) => {
    approve.disabled = true;
    reject.disabled = true;
    article.dataset.keep = 'true';
    outcome.className = 'outcome';
    outcome.textContent = t(verb === 'approve' ? 'approving' : 'rejecting');
    try {
      // One prepare, one decision; never repeated.
      const prepared = await pipeline('review.prepare', { id: c.id }, true);
      const args = { id: c.id, revision: prepared.revision, contentHash: prepared.contentHash, token: prepared.token,
        idempotencyKey: freshKey() };
      if (verb === 'reject' && reason.value.trim()) args.reason = reason.value.trim();
      const result = await pipeline(`review.${verb}`, args, true);
      outcome.className = 'outcome ok';
      outcome.textContent = verb === 'approve' ? t('approved', { id: result.cardId, rev: result.revision }) : t('rejected');
      article.classList.add('decided');
      article.dataset.decided = verb;
    } catch (e) {
      outcome.className = 'outcome error';
      outcome.dataset.code = e.code || '';
      outcome.textContent = `${t('failed', { msg: `${e.message} (${e.code})` })} ${t('not_retried')}`;
      approve.disabled = false;
      reject.disabled = false;
    }
  };
  approve.addEventListener('click', () => decide('approve'));
  reject.addEventListener('click', () => decide('reject'));
  return article;
}

export function checksBlock(checks) {
  return h('section', { class: 'checks' }, h('h3', null, t('checks')),
    checks.length
      // `ok` is null when the check could not be evaluated: neither holds nor fails.
      ? h('ul', null, checks.map((check) => h('li', { class: check.ok ? 'ok' : check.ok === false ? 'bad' : 'unknown' },
        h('span', { class: 'verdict' }, check.ok ? `✓ ${t('check_ok')}` : check.ok === false ? `✗ ${t('check_failed')}`
          : `? ${t('check_unknown')}`), ' ',
        h('code', null, check.type || ''), ' ', check.path || '',
        // The path, a space, then the quoted text between quotation marks.
        check.text ? [' ', h('span', { class: 'quote' }, `“${check.text}”`)] : null,
        check.reason ? h('span', { class: 'muted' }, ` — ${check.reason}`) : null)))
      : h('p', { class: 'muted' }, t('no_checks')));
}

export function evidenceBlock(evidence) {
  return h('details', { class: 'evidence' }, h('summary', null, `${t('evidence')} (${evidence.length})`),
    h('ul', null, evidence.map((item) => h('li', null,
      h('span', { class: 'muted' }, [item.source, item.type, when(item.at)].filter(Boolean).join(' · ')), ' ',
      item.text ? h('span', null, item.text) : h('code', null, item.id || '')))));
}

function diffBlock(c) {
  const current = c.current;
  const section = h('section', { class: 'diff' }, h('h3', null, t('diff')));
  if (!current) return append(section, h('p', { class: 'muted' }, t('current_gone')));
  const next = c.op === 'archive' ? {} : c.card || {};
  for (const field of ['title', 'summary', 'appliesTo', 'tags', 'body']) {
    const before = fieldText(current[field]);
    const after = fieldText(next[field]);
    if (before === after) continue;
    section.append(h('h4', null, field), lineDiff(before, after));
  }
  return section;
}

function append(el, child) {
  el.append(child);
  return el;
}

function fieldText(value) {
  if (Array.isArray(value)) return value.join(', ');
  return value === undefined || value === null ? '' : String(value);
}

/** A line diff (longest common subsequence) as a <pre> of kept, removed and added lines. */
export function lineDiff(before, after) {
  const a = before === '' ? [] : before.split('\n');
  const b = after === '' ? [] : after.split('\n');
  if (a.length * b.length > 250000) {
    return h('pre', { class: 'diffview' }, a.map((l) => h('del', null, `- ${l}\n`)), b.map((l) => h('ins', null, `+ ${l}\n`)));
  }
  const table = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) {
      table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push(h('span', null, `  ${a[i]}\n`));
      i += 1;
      j += 1;
    } else if (j < b.length && (i >= a.length || table[i][j + 1] >= table[i + 1][j])) {
      out.push(h('ins', null, `+ ${b[j]}\n`));
      j += 1;
    } else {
      out.push(h('del', null, `- ${a[i]}\n`));
      i += 1;
    }
  }
  return h('pre', { class: 'diffview' }, out);
}
