// Markdown of chat replies as page elements: paragraphs, headings, lists, code, bold,
// italics, web links and [n] citations. Everything is built as DOM nodes from text, never
// parsed as HTML, so a reply that contains <script> or <img onerror> shows those
// characters and runs nothing.

import { h } from './dom.js';

const INLINE = new RegExp([
  '`([^`\\n]+)`', // 1 code
  '\\*\\*([^*\\n]+?)\\*\\*', // 2 bold
  '(?<![\\w])__(?=\\S)([^_\\n]+?)__(?![\\w])', // 3 bold
  '\\*([^*\\s][^*\\n]*?)\\*', // 4 italic
  '(?<![\\w])_([^_\\s][^_\\n]*?)_(?![\\w])', // 5 italic
  '\\[(\\d{1,2})\\]', // 6 citation
  '\\[([^\\]\\n]+)\\]\\((https?://[^)\\s]+)\\)', // 7 text, 8 address of a link
].join('|'), 'g');

/** Inline markup of one line or paragraph; `cite(n)` makes citation n's node (or null). */
function inline(text, cite) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    const citation = m[6] ? cite(Number(m[6])) : undefined;
    if (citation === null) continue; // [n] with no source n stays as written
    out.push(text.slice(last, m.index));
    if (m[1]) out.push(h('code', {}, m[1]));
    else if (m[2] || m[3]) out.push(h('strong', {}, inline(m[2] || m[3], cite)));
    else if (m[4] || m[5]) out.push(h('em', {}, inline(m[4] || m[5], cite)));
    else if (m[6]) out.push(citation);
    else out.push(h('a', { href: m[8], rel: 'noopener noreferrer', target: '_blank' }, m[7]));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out.filter((p) => p !== '');
}

const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*(\d{1,3})[.)]\s+(.*)$/;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*$/;
const FENCE = /^\s*```/;

/**
 * The nodes of `text` read as Markdown. `cite(n)` returns the node for citation [n], or
 * null to leave it as text (no such source).
 */
export function markdown(text, cite = () => null) {
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  const blocks = [];
  let para = [];
  const flush = () => {
    if (para.length) blocks.push(h('p', {}, inline(para.join('\n'), cite)));
    para = [];
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    if (FENCE.test(line)) {
      flush();
      const code = [];
      for (i += 1; i < lines.length && !FENCE.test(lines[i]); i += 1) code.push(lines[i]);
      blocks.push(h('pre', {}, h('code', {}, code.join('\n'))));
    } else if (HEADING.test(line)) {
      flush();
      const [, hashes, title] = line.match(HEADING);
      blocks.push(h(hashes.length <= 2 ? 'h3' : 'h4', { class: 'md-heading' }, inline(title, cite)));
    } else if (BULLET.test(line) || NUMBERED.test(line)) {
      flush();
      const numbered = NUMBERED.test(line);
      const pattern = numbered ? NUMBERED : BULLET;
      const items = [];
      const start = numbered ? Number(line.match(NUMBERED)[1]) : null;
      for (; i < lines.length && pattern.test(lines[i]); i += 1) {
        const m = lines[i].match(pattern);
        items.push(h('li', {}, inline(numbered ? m[2] : m[1], cite)));
      }
      i -= 1;
      blocks.push(numbered ? h('ol', { start: start !== 1 ? start : null }, items) : h('ul', {}, items));
    } else if (!line.trim()) {
      flush();
    } else {
      para.push(line);
    }
  }
  flush();
  return blocks;
}
