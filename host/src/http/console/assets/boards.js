// The tools and services boards: a card per item with its icon, state, start / stop /
// restart, the manifest's actions, groups, `frequency: low` folded, live logs; and the
// display preferences (`all | resident`, the "manage display" drawer, search, ordering)
// saved in the host's layout (`PUT /layout`). An item that is an MCP server the hub runs
// (its manifest's `mcp` block, no `hosted` one) says so, with the hub's state of it.

import { call, get, streamUrl, withProof } from './api.js';
import { duration, h, modal, replace, safeUrl, when } from './dom.js';
import { stateText, t } from './i18n.js';

const LIVE = new Set(['starting', 'running', 'healthy', 'unhealthy']);

/** Whether a stop means something: it runs, or waits to be restarted, or crashed (a stop
 * then tells the host the owner wants it stopped, across restarts too). */
const stoppable = (item) => LIVE.has(item.state) || ['backoff', 'crashed', 'restarting', 'stopping'].includes(item.state);
const MAX_LOG_LINES = 2000;

export async function boardView(main, ctx, board) {
  const view = new Board(main, ctx, board);
  await view.load();
  view.watchCosts();
  return view;
}

/** The hub's providers by id (`{state}` each), for the items that are MCP servers; none when unreadable. */
async function mcpProviders() {
  try {
    const status = await get('/mcp/status');
    return new Map((status.providers || []).map((p) => [p.id, p]));
  } catch {
    return new Map();
  }
}

/** An item's state badge: its run state, or — for an MCP server the hub runs — that, with the hub's state. */
function stateBadge(item, providers) {
  if (item.mcpNamespace && !item.hosted) {
    const provider = providers.get(item.id);
    const state = provider ? provider.state : 'idle';
    return h('span', { class: `badge state state-${state}`, 'data-mcp-state': state }, t('mcp_badge', { state: stateText(state) }));
  }
  return h('span', { class: `badge state state-${item.state}` }, stateText(item.state));
}

/** How often the cards' CPU and memory figures are read again while the board is shown. */
const COST_EVERY_MS = 5000;

/** An item's CPU and memory figures as shown, `[key, text or null]` each. */
function costs(item) {
  return [['cpu', typeof item.cpuPercent === 'number' ? t('cpu', { p: item.cpuPercent.toFixed(1) }) : null],
    ['rss', typeof item.rssBytes === 'number' ? t('rss', { mb: (item.rssBytes / 1e6).toFixed(1) }) : null]];
}

class Board {
  constructor(main, ctx, board) {
    this.main = main;
    this.ctx = ctx;
    this.board = board;
    this.items = [];
    this.providers = new Map(); // the hub's providers by id, for the items that are MCP servers
    this.query = '';
    this.override = null; // a layout being saved, shown until the host answers
    this.outcomes = new Map(); // item id → the last action's outcome, kept across re-renders
    this.lowOpen = false; // whether the owner unfolded the `frequency: low` items
    this.openMenu = null; // the item whose card menu is open, kept open across re-renders
    this.dragging = false; // a card is being dragged: re-renders wait for the drop
    this.renderLater = false;
    this.grid = h('div', { class: 'board', id: `${board}-board` });
    this.notice = h('p', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
    this.search = h('input', { type: 'search', id: `${board}-search`, placeholder: t('search_items') });
    this.search.addEventListener('input', () => {
      this.query = this.search.value.trim().toLowerCase();
      this.render();
    });
    this.toolbar = h('div', { class: 'row toolbar' });
    replace(main, h('h1', null, t(`${board}_title`)), this.toolbar, this.notice, this.grid);
  }

  /** Items and layout from the host; `refresh` only re-reads the items. */
  async load() {
    const path = this.board === 'tools' ? '/overview' : '/services';
    const [list, providers] = await Promise.all([get(path), mcpProviders(), this.ctx.layout.load()]);
    this.items = list[this.board] || [];
    this.providers = providers;
    this.render();
  }

  async refresh(what) {
    if (what.has('layout')) await this.ctx.layout.load().catch(() => null);
    if (what.has('supervised') || what.has('catalog')) {
      const path = this.board === 'tools' ? '/overview' : '/services';
      this.items = (await get(path))[this.board] || [];
    }
    if (what.has('mcp') || what.has('catalog')) this.providers = await mcpProviders();
    this.render();
  }

  /** Keeps the running items' CPU and memory current while this board is on screen and the
   * tab visible: figures are updated in place (a card that gained them is drawn again). */
  watchCosts() {
    const timer = setInterval(async () => {
      if (!this.main.contains(this.grid)) return clearInterval(timer);
      if (document.hidden || !this.items.some((i) => LIVE.has(i.state))) return;
      const path = this.board === 'tools' ? '/overview' : '/services';
      let items;
      try {
        items = (await get(path))[this.board] || [];
      } catch {
        return;
      }
      if (!this.main.contains(this.grid)) return;
      let redraw = false;
      for (const item of items) {
        const card = this.grid.querySelector(`article.item[data-id="${CSS.escape(item.id)}"]`);
        if (!card || !LIVE.has(item.state)) continue;
        for (const [key, text] of costs(item)) {
          const shown = card.querySelector(`[data-meta="${key}"]`);
          if (shown && text) shown.textContent = text;
          else if (!shown && text) redraw = true;
        }
      }
      this.items = items;
      if (redraw) this.render();
    }, COST_EVERY_MS);
  }

  layout() {
    return this.override || this.ctx.layout.saved;
  }

  display(layout = this.layout()) {
    const d = (layout.display && layout.display[this.board]) || {};
    return { mode: d.mode === 'resident' ? 'resident' : 'all', stored: Array.isArray(d.stored) ? d.stored : [] };
  }

  ordered(layout = this.layout()) {
    const order = (layout.order && layout.order[this.board]) || [];
    const rank = new Map(order.map((id, i) => [id, i]));
    return this.items
      .map((item, i) => ({ item, i }))
      .sort((a, b) => (rank.get(a.item.id) ?? order.length + a.i) - (rank.get(b.item.id) ?? order.length + b.i))
      .map(({ item }) => item);
  }

  /** Saves `next` (the whole layout); the view shows it meanwhile and goes back on failure. */
  async save(next) {
    this.override = next;
    this.render();
    this.notice.className = 'outcome';
    this.notice.textContent = t('saving');
    try {
      await this.ctx.layout.save(next);
      this.notice.textContent = t('saved');
      return true;
    } catch (e) {
      this.notice.className = 'outcome error';
      this.notice.textContent = t('save_failed', { msg: e.message });
      return false;
    } finally {
      this.override = null;
      this.render();
    }
  }

  withDisplay(change) {
    const next = structuredClone(this.ctx.layout.saved);
    next.version = 1;
    next.display = next.display || {};
    const d = this.display(next);
    change(d);
    next.display[this.board] = { mode: d.mode, stored: [...new Set(d.stored)] };
    return next;
  }

  renderToolbar() {
    const { mode, stored } = this.display();
    const modeButton = (value, key) => h('button', { type: 'button', class: 'toggle', 'aria-pressed': String(mode === value),
      'data-mode': value, onclick: () => mode !== value && this.save(this.withDisplay((d) => { d.mode = value; })) }, t(key));
    replace(this.toolbar,
      h('div', { class: 'segmented', role: 'group', 'aria-label': t(`${this.board}_title`) },
        modeButton('all', 'show_all'), modeButton('resident', 'show_resident')),
      h('button', { type: 'button', class: 'manage', onclick: () => this.openDrawer() }, t('manage', { n: stored.length })),
      h('label', { for: this.search.id, class: 'sr' }, t('search_items')), this.search,
      h('button', { type: 'button', class: 'ghost reset-order', onclick: () => this.resetOrder() }, t('reset_order')));
  }

  resetOrder() {
    const next = structuredClone(this.ctx.layout.saved);
    if (next.order) delete next.order[this.board];
    this.save(next);
  }

  render() {
    // Replacing the cards mid-drag would cancel the owner's drag: a live update waits.
    if (this.dragging) {
      this.renderLater = true;
      return;
    }
    this.renderLater = false;
    const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest('[data-focus-key]');
    const focusKey = focused && focused.dataset.focusKey;
    this.renderToolbar();
    const { mode, stored } = this.display();
    const storedSet = new Set(stored);
    const q = this.query;
    const searching = q !== '';
    let shown = this.ordered();
    if (searching) {
      shown = shown.filter((i) => [i.name, i.id, i.description].some((f) => String(f || '').toLowerCase().includes(q)));
    } else if (mode === 'resident') {
      shown = shown.filter((i) => !storedSet.has(i.id));
    }
    const draggable = mode === 'all' && !searching;
    const cards = shown.map((item) => this.card(item, storedSet.has(item.id), draggable));
    if (!this.items.length) {
      replace(this.grid, h('p', { class: 'muted empty' }, t(`${this.board}_empty`)));
    } else {
      const frequent = cards.filter((c) => c.dataset.low !== 'true');
      const rare = cards.filter((c) => c.dataset.low === 'true');
      const groups = new Map();
      for (const c of frequent) {
        const g = c.dataset.group || '';
        if (!groups.has(g)) groups.set(g, []);
        groups.get(g).push(c);
      }
      const named = [...groups.keys()].some((g) => g !== '');
      const sections = [...groups.entries()].map(([g, list]) => h('section', { class: 'group', 'data-group': g },
        named ? h('h2', null, g || t('ungrouped')) : null, h('div', { class: 'grid' }, list)));
      replace(this.grid, sections,
        rare.length ? h('details', { class: 'low', open: searching || this.lowOpen || undefined,
          ontoggle: (e) => { if (!searching) this.lowOpen = e.currentTarget.open; } },
          h('summary', null, t('low_frequency', { n: rare.length })), h('div', { class: 'grid' }, rare)) : null,
        draggable ? h('p', { class: 'muted hint' }, t('drag_hint')) : null);
    }
    if (focusKey) {
      const again = this.main.querySelector(`[data-focus-key="${CSS.escape(focusKey)}"]`);
      if (again) again.focus();
    }
  }

  card(item, stored, draggable) {
    const key = (what) => `${item.id}:${what}`;
    const said = this.outcomes.get(item.id);
    const outcome = h('p', { class: said ? `outcome ${said.tone}` : 'outcome', role: 'status', 'aria-live': 'polite' },
      said ? said.text : null);
    const live = LIVE.has(item.state);
    const act = (action) => h('button', { type: 'button', 'data-action': action, 'data-focus-key': key(action),
      onclick: (e) => this.act(item, action, e.currentTarget) }, t(action));
    const meta = [];
    if (live && item.startedAt) meta.push(h('span', { 'data-since': item.startedAt }, t('uptime', { d: duration(Date.now() - item.startedAt) })));
    if (live) meta.push(...costs(item).filter(([, text]) => text).map(([key, text]) => h('span', { 'data-meta': key }, text)));
    if (item.restarts) meta.push(h('span', null, t('restarts', { n: item.restarts })));
    if (item.nextRestartAt) meta.push(h('span', null, t('next_restart', { t: when(item.nextRestartAt) })));
    if (item.lastExit) meta.push(h('span', { 'data-meta': 'last-exit' }, t(item.lastExit.requested ? 'last_exit_stopped' : 'last_exit', { code: item.lastExit.code, t: when(item.lastExit.at) })));
    const el = h('article', { class: `item card${stored ? ' stored' : ''}`, 'data-id': item.id, 'data-state': item.state,
      'data-group': item.group || '', 'data-low': String(item.frequency === 'low'), tabindex: draggable ? 0 : null,
      draggable: draggable ? 'true' : null, 'aria-labelledby': `${this.board}-name-${item.id}`, 'data-focus-key': key('card') },
      h('header', { class: 'row' }, icon(item),
        h('h3', { id: `${this.board}-name-${item.id}`, class: 'name' }, item.name || item.id),
        stateBadge(item, this.providers),
        stored ? h('span', { class: 'badge muted stored-mark' }, t('stored_mark')) : null),
      h('p', { class: 'meta' }, h('code', null, item.id)),
      item.description ? h('p', { class: 'desc' }, item.description) : null,
      meta.length ? h('p', { class: 'meta' }, meta.map((m, i) => [i ? ' · ' : '', m])) : null,
      item.error ? h('p', { class: 'error' }, item.error) : null,
      item.hosted ? h('div', { class: 'row controls' }, live ? null : act('start'), stoppable(item) ? act('stop') : null, act('restart'),
        h('button', { type: 'button', 'data-focus-key': key('logs'), onclick: () => this.ctx.openLog(this.board, item) }, t('logs')),
        h('button', { type: 'button', 'data-action': 'details', 'data-focus-key': key('details'), onclick: () => openDetails(this.board, item) }, t('details'))) : null,
      // An MCP server the hub runs: its log here, the rest (start, stop, tools) in the MCP view.
      item.mcpNamespace && !item.hosted ? h('div', { class: 'row controls' },
        h('button', { type: 'button', 'data-focus-key': key('mcp-logs'), 'data-action': 'mcp-logs',
          onclick: () => this.ctx.openLog('mcp/providers', { id: item.id, name: item.name || item.id }) }, t('logs')),
        h('a', { href: '#/mcp' }, t('mcp_view'))) : null,
      this.actions(item),
      this.menu(item, stored, draggable),
      outcome);
    if (draggable) this.makeDraggable(el, item);
    return el;
  }

  /** Shows an action's outcome on the item's card, now and after any re-render. */
  tell(id, tone, text) {
    if (text) this.outcomes.set(id, { tone, text });
    else this.outcomes.delete(id);
    const shown = this.grid.querySelector(`article.item[data-id="${CSS.escape(id)}"] .outcome`);
    if (shown) {
      shown.className = tone ? `outcome ${tone}` : 'outcome';
      shown.textContent = text;
    }
  }

  actions(item) {
    const actions = [...(item.actions || [])];
    if (item.panelUrl && !actions.some((a) => a.url === item.panelUrl)) actions.unshift({ label: item.name, url: item.panelUrl, mode: 'panel' });
    if (!actions.length) return null;
    return h('div', { class: 'row actions' }, actions.map((action) => {
      const url = safeUrl(action.url);
      const mode = action.mode || 'panel';
      if (!url) return null;
      if (mode === 'external') {
        return h('a', { class: 'button', href: url, target: '_blank', rel: 'noopener noreferrer', 'data-mode': 'external' },
          action.label, h('span', { class: 'sr' }, ` ${t('opens_new_tab')}`), ' ↗');
      }
      return h('button', { type: 'button', 'data-mode': mode, onclick: () => (mode === 'post'
        ? this.post(item, action, url) : this.ctx.openPanel(item, action, url)) }, action.label);
    }));
  }

  menu(item, stored, draggable) {
    const close = (e) => e.currentTarget.closest('details').removeAttribute('open');
    const toggled = (e) => {
      if (e.currentTarget.open) this.openMenu = item.id;
      else if (this.openMenu === item.id) this.openMenu = null;
    };
    return h('details', { class: 'menu', open: this.openMenu === item.id || undefined, ontoggle: toggled }, h('summary', { 'aria-label': `${t('menu')}: ${item.name}` }, '⋯'),
      h('div', { class: 'menu-list' },
        h('button', { type: 'button', 'data-menu': stored ? 'pin' : 'store', onclick: (e) => {
          close(e);
          this.save(this.withDisplay((d) => {
            d.stored = stored ? d.stored.filter((id) => id !== item.id) : [...d.stored, item.id];
          }));
        } }, t(stored ? 'pin_item' : 'store_item')),
        draggable ? h('button', { type: 'button', onclick: (e) => { close(e); this.move(item.id, -1); } }, t('move_earlier')) : null,
        draggable ? h('button', { type: 'button', onclick: (e) => { close(e); this.move(item.id, 1); } }, t('move_later')) : null));
  }

  async act(item, action, button) {
    button.disabled = true;
    this.tell(item.id, '', '…');
    try {
      await call('POST', `/${this.board}/${encodeURIComponent(item.id)}/${action}`);
      this.tell(item.id, '', '');
      await this.refresh(new Set(['supervised']));
    } catch (e) {
      this.tell(item.id, 'error', t('action_failed', { action: t(action), msg: e.message }));
      button.disabled = false;
    }
  }

  /** A `post` action: one POST, its outcome shown on the card. */
  async post(item, action, url) {
    this.tell(item.id, '', '…');
    try {
      const response = await fetch(url, { method: 'POST', credentials: 'omit', cache: 'no-store' });
      this.tell(item.id, response.ok ? 'ok' : 'error',
        t('post_sent', { label: action.label, status: `${response.status} ${response.statusText}` }));
    } catch (e) {
      this.tell(item.id, 'error', t('post_failed', { label: action.label, msg: e.message }));
    }
  }

  move(id, by) {
    const ids = this.ordered().map((i) => i.id);
    const at = ids.indexOf(id);
    const to = at + by;
    if (at < 0 || to < 0 || to >= ids.length) return;
    ids.splice(at, 1);
    ids.splice(to, 0, id);
    this.saveOrder(ids);
  }

  saveOrder(ids) {
    const next = structuredClone(this.ctx.layout.saved);
    next.version = 1;
    next.order = next.order || {};
    next.order[this.board] = ids;
    this.save(next);
  }

  makeDraggable(el, item) {
    el.addEventListener('dragstart', (e) => {
      e.dataTransfer.setData('text/plain', item.id);
      e.dataTransfer.effectAllowed = 'move';
      el.classList.add('dragging');
      this.dragging = true;
    });
    el.addEventListener('dragend', () => {
      el.classList.remove('dragging');
      this.dragging = false;
      if (this.renderLater) this.render();
    });
    el.addEventListener('dragover', (e) => {
      e.preventDefault();
      e.dataTransfer.dropEffect = 'move';
    });
    el.addEventListener('drop', (e) => {
      e.preventDefault();
      const dragged = e.dataTransfer.getData('text/plain');
      if (!dragged || dragged === item.id) return;
      const ids = this.ordered().map((i) => i.id).filter((id) => id !== dragged);
      ids.splice(ids.indexOf(item.id), 0, dragged);
      this.saveOrder(ids);
    });
    el.addEventListener('keydown', (e) => {
      if (e.target !== el || !e.altKey || (e.key !== 'ArrowUp' && e.key !== 'ArrowDown')) return;
      e.preventDefault();
      this.move(item.id, e.key === 'ArrowUp' ? -1 : 1);
    });
  }

  /** The drawer: every item, ticked when resident; save / cancel. A failed save keeps it open with the draft. */
  openDrawer() {
    const draft = new Set(this.display().stored);
    const error = h('p', { class: 'outcome', role: 'status', 'aria-live': 'polite' });
    const filter = h('input', { type: 'search', id: `${this.board}-drawer-search`, placeholder: t('search_items') });
    const rows = h('ul', { class: 'drawer-list' });
    const fill = () => {
      const q = filter.value.trim().toLowerCase();
      replace(rows, this.ordered().filter((i) => !q || [i.name, i.id, i.description].some((f) => String(f || '').toLowerCase().includes(q)))
        .map((item) => {
          const box = h('input', { type: 'checkbox', id: `resident-${this.board}-${item.id}`, 'data-id': item.id, checked: !draft.has(item.id) });
          box.addEventListener('change', () => (box.checked ? draft.delete(item.id) : draft.add(item.id)));
          const action = stoppable(item) ? 'stop' : 'start';
          return h('li', { class: 'row' }, box, h('label', { for: box.id }, icon(item), ' ', item.name || item.id, ' ',
            h('code', null, item.id)), stateBadge(item, this.providers),
            item.hosted ? h('button', { type: 'button', class: 'ghost', 'data-action': action, onclick: (e) => this.act(item, action, e.currentTarget, error) },
              t(action)) : null);
        }));
    };
    filter.addEventListener('input', fill);
    fill();
    const dialog = h('dialog', { class: 'drawer', 'aria-labelledby': `${this.board}-drawer-title` });
    const save = h('button', { type: 'button', class: 'primary', 'data-drawer': 'save' }, t('save'));
    save.addEventListener('click', async () => {
      save.disabled = true;
      error.className = 'outcome';
      error.textContent = t('saving');
      const ok = await this.save(this.withDisplay((d) => { d.stored = [...draft]; }));
      save.disabled = false;
      if (ok) dialog.close();
      else {
        error.className = 'outcome error';
        error.textContent = this.notice.textContent;
      }
    });
    append(dialog, h('h2', { id: `${this.board}-drawer-title` }, t('drawer_title')),
      h('p', { class: 'muted' }, t('drawer_help')), h('label', { for: filter.id, class: 'sr' }, t('search_items')), filter, rows, error,
      h('div', { class: 'row end' }, h('button', { type: 'button', 'data-drawer': 'cancel', onclick: () => dialog.close() }, t('cancel')), save));
    dialog.addEventListener('close', () => dialog.remove());
    document.body.append(dialog);
    dialog.showModal();
  }
}

function append(el, ...children) {
  el.append(...children);
  return el;
}

/** The item's icon: a host-served or data: image, or its text / letter. */
export function icon(item) {
  const i = item.icon || {};
  if ((i.type === 'image' || i.type === 'url') && safeUrl(i.url, true)) {
    return h('img', { class: 'icon', src: withProof(i.url), alt: '', width: 28, height: 28, loading: 'lazy' });
  }
  const text = i.text || String(item.name || item.id || '?').slice(0, 1).toUpperCase();
  return h('span', { class: 'icon', 'aria-hidden': 'true' }, text);
}

/** Live log in a dialog: backlog, then live lines, until closed. */
export function openLog(board, item) {
  const pre = h('pre', { class: 'log', 'aria-live': 'off', tabindex: 0 });
  const state = h('span', { class: 'badge', 'data-log-state': 'connecting' }, t('log_waiting'));
  const lines = []; // every line received, for the filter and the download: {text, stream}
  const filter = h('input', { type: 'search', id: 'log-filter', placeholder: t('log_filter'), 'data-log': 'filter' });
  const stderrOnly = h('input', { type: 'checkbox', id: 'log-stderr', 'data-log': 'stderr' });
  let paused = false;
  const pause = h('button', { type: 'button', 'data-log': 'pause', 'aria-pressed': 'false' }, t('log_pause'));
  const shown = (line) => (!stderrOnly.checked || line.stream === 'stderr')
    && (!filter.value || line.text.toLowerCase().includes(filter.value.toLowerCase()));
  const render = (line) => h('span', { class: `stream-${line.stream}` }, `${line.text}\n`);
  const follow = () => { if (!paused) pre.scrollTop = pre.scrollHeight; };
  const redraw = () => {
    pre.replaceChildren(...lines.filter(shown).map(render));
    follow();
  };
  const add = (text, stream) => {
    const line = { text, stream };
    lines.push(line);
    if (lines.length > MAX_LOG_LINES) lines.shift();
    if (!shown(line)) return;
    pre.append(render(line));
    while (pre.childNodes.length > MAX_LOG_LINES) pre.firstChild.remove();
    follow();
  };
  filter.addEventListener('input', redraw);
  stderrOnly.addEventListener('change', redraw);
  pause.addEventListener('click', () => {
    paused = !paused;
    pause.setAttribute('aria-pressed', String(paused));
    pause.textContent = t(paused ? 'log_resume' : 'log_pause');
    follow();
  });
  const download = h('button', { type: 'button', 'data-log': 'download', onclick: () => {
    const blob = new Blob([lines.map((l) => `${l.text}\n`).join('')], { type: 'text/plain' });
    // The console's own blob: URL, set directly (h() lets only http(s) links through).
    const link = document.createElement('a');
    link.href = URL.createObjectURL(blob);
    link.download = `${item.id}.log`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  } }, t('log_download'));
  const dialog = h('dialog', { class: 'logview', 'aria-labelledby': 'log-title' },
    h('header', { class: 'row' }, h('h2', { id: 'log-title' }, t('log_title', { name: item.name || item.id })), state,
      h('button', { type: 'button', class: 'close', onclick: () => dialog.close() }, t('close'))),
    h('div', { class: 'row log-tools' }, h('label', { for: filter.id, class: 'sr' }, t('log_filter')), filter,
      h('label', null, stderrOnly, ' ', t('log_stderr_only')), pause, download),
    pre);
  const source = new EventSource(streamUrl(`/${board}/${encodeURIComponent(item.id)}/log`));
  source.addEventListener('log', (e) => {
    try {
      const line = JSON.parse(e.data);
      add(`${new Date(line.at).toLocaleTimeString()} ${line.stream} ${line.text}`, line.stream);
    } catch {
      add(String(e.data), 'butler');
    }
  });
  source.addEventListener('live', () => {
    state.textContent = t('log_live');
    state.dataset.logState = 'live';
  });
  source.addEventListener('skipped', (e) => {
    try {
      add(t('log_skipped', { n: JSON.parse(e.data).lines }), 'butler');
    } catch { /* ignore */ }
  });
  dialog.addEventListener('close', () => {
    source.close();
    dialog.remove();
  });
  document.body.append(dialog);
  dialog.showModal();
}

/** The owner's details of a hosted item: what runs, where, its health and its last runs. */
export async function openDetails(board, item) {
  const body = h('div', { class: 'details' }, h('p', { class: 'muted' }, t('loading')));
  modal('details-view', 'details-title', t('details_title', { name: item.name || item.id }), t('close'), body);
  let d;
  try {
    d = await call('POST', `/${board}/${encodeURIComponent(item.id)}/details`, undefined, { owner: true });
  } catch (e) {
    replace(body, h('p', { class: 'error' }, e.message));
    return;
  }
  const row = (key, value) => h('tr', { 'data-detail': key }, h('th', { scope: 'row' }, t(`detail_${key}`)), h('td', null, value ?? '—'));
  const health = d.health ? `${d.health.ok ? '✓' : '✗'} ${d.health.detail} (${when(d.health.at)})` : null;
  replace(body,
    h('table', { class: 'facts' }, h('tbody', null,
      row('command', d.command ? h('code', null, d.command.join(' ')) : d.launchError),
      row('cwd', d.cwd ? h('code', null, d.cwd) : null),
      row('pid', d.pid === null ? null : `${d.pid} (group ${d.pgid})`),
      row('port', d.port === null ? null : String(d.port)),
      row('health', health),
      row('restart', d.restart))),
    h('h3', null, t('details_history')),
    d.history.length
      ? h('table', { class: 'history' }, h('thead', null, h('tr', null, ['details_started', 'details_ended', 'details_exit']
        .map((k) => h('th', { scope: 'col' }, t(k))))),
        h('tbody', null, [...d.history].reverse().map((run) => h('tr', { 'data-run': '' },
          h('td', null, run.startedAt ? when(run.startedAt) : '—'), h('td', null, when(run.exit.at)),
          h('td', null, run.exit.requested ? t('details_stopped', { code: run.exit.code }) : String(run.exit.code))))))
      : h('p', { class: 'muted' }, t('details_no_runs')));
}

/** A `panel` action: the page in an iframe at `panelSize`, shrunk to fit the viewport. */
export function openPanel(item, action, url) {
  const size = item.panelSize || {};
  const width = Math.max(200, Math.min(size.width || 960, window.innerWidth - 48));
  const height = Math.max(160, Math.min(size.height || 640, window.innerHeight - 140));
  const sameOrigin = new URL(url).origin === location.origin;
  const frame = h('iframe', { src: url, title: action.title || action.label, width, height,
    // A panel from the console's own origin must not get script access to the console.
    sandbox: sameOrigin ? 'allow-forms allow-popups' : 'allow-scripts allow-forms allow-popups allow-same-origin allow-downloads',
    referrerpolicy: 'no-referrer' });
  modal('panel', 'panel-title', action.title || action.label || item.name, t('close'), frame);
}
