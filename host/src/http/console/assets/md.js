// A tiny Markdown renderer that builds DOM nodes: headings, paragraphs, lists, code
// blocks, inline code, emphasis, strong and links (http/https only). Text always becomes
// text nodes, so a report can never add markup or script to the console.

import { h, safeUrl } from './dom.js';

export function renderMarkdown(source) {
  const root = h('div', { class: 'md' });
  const lines = String(source ?? '').replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  let paragraph = [];
  let list = null;
  const flush = () => {
    if (paragraph.length) root.append(h('p', null, inline(paragraph.join(' '))));
    paragraph = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)/);
    if (fence) {
      flush();
      list = null;
      const code = [];
      i += 1;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence[1])) code.push(lines[i++]);
      i += 1;
      root.append(h('pre', null, h('code', null, code.join('\n'))));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    const item = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
    if (heading) {
      flush();
      list = null;
      const level = Math.min(6, heading[1].length + 2);
      root.append(h(`h${level}`, null, inline(heading[2])));
    } else if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      if (!list || list.ordered !== ordered) {
        list = { ordered, el: h(ordered ? 'ol' : 'ul') };
        root.append(list.el);
      }
      list.el.append(h('li', null, inline(item[2])));
    } else if (line.trim() === '') {
      flush();
      list = null;
    } else if (/^\s*>\s?/.test(line)) {
      flush();
      list = null;
      root.append(h('blockquote', null, inline(line.replace(/^\s*>\s?/, ''))));
    } else {
      list = null;
      paragraph.push(line.trim());
    }
    i += 1;
  }
  flush();
  return root;
}

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*]+\*|_[^_]+_)|(\[[^\]]*\]\([^)\s]*\))/;

/** Inline spans as nodes. */
export function inline(text) {
  const out = [];
  let rest = String(text);
  for (let guard = 0; rest && guard < 10000; guard += 1) {
    const m = rest.match(INLINE);
    if (!m) {
      out.push(rest);
      break;
    }
    if (m.index > 0) out.push(rest.slice(0, m.index));
    const token = m[0];
    if (m[1]) out.push(h('code', null, token.slice(1, -1)));
    else if (m[2]) out.push(h('strong', null, token.slice(2, -2)));
    else if (m[3]) out.push(h('em', null, token.slice(1, -1)));
    else {
      const [, label, target] = token.match(/^\[([^\]]*)\]\(([^)\s]*)\)$/) || [];
      const url = safeUrl(target) && /^https?:\/\//i.test(target) ? target : null;
      out.push(url ? h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, label) : label);
    }
    rest = rest.slice(m.index + token.length);
  }
  return out;
}
