// DOM helpers. Everything reaches the page as text nodes or checked attributes: no
// innerHTML anywhere, so nothing an extension says can become markup or script.

/** An element: h('button', {class: 'x', onclick: fn}, 'text', child…). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'href' || key === 'src') {
      const url = safeUrl(value, key === 'src');
      if (url) el.setAttribute(key, url);
    } else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

/** Appends text or nodes (arrays flattened, null skipped). */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replaces the children of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** An http(s) URL (absolute, or relative to the console), or null. `data:image/` passes for images. */
export function safeUrl(value, image = false) {
  if (typeof value !== 'string') return null;
  if (image && /^data:image\/(png|jpeg|gif|webp|svg\+xml)[;,]/i.test(value)) return value;
  try {
    const url = new URL(value, location.href);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

/** "3 h 4 min" style durations from milliseconds. */
export function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return `${hours} h ${m % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/** A local date-time from ms or an RFC 3339 string. */
export function when(at) {
  if (at === null || at === undefined || at === '') return '';
  const d = new Date(at);
  return Number.isNaN(d.getTime()) ? String(at) : d.toLocaleString();
}

/**
 * A modal dialog with a header (its title and a close button) above `body`, shown at once
 * and removed from the page when closed. Returns the dialog and its title element.
 */
export function modal(className, titleId, title, closeLabel, ...body) {
  const heading = h('h2', { id: titleId }, title);
  const dialog = h('dialog', { class: className, 'aria-labelledby': titleId },
    h('header', { class: 'row' }, heading,
      h('button', { type: 'button', class: 'close', onclick: () => dialog.close() }, closeLabel)), ...body);
  dialog.addEventListener('close', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  return { dialog, heading };
}
