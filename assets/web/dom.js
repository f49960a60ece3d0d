// Building the page without innerHTML (text from documents and users is never parsed as
// HTML), small formatters, and the shared dialogs.

const PROPS = new Set(['value', 'checked', 'disabled', 'selected', 'multiple', 'hidden', 'open']);

/** An element: h('button', {class: 'primary', onclick}, 'Save'). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (PROPS.has(k)) el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

/** Appends children, skipping null and false (so optional parts can be written inline). */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);

/** Text that may be Arabic (or any right-to-left script): the browser picks the direction. */
export const auto = (tag, attrs, ...children) => h(tag, { dir: 'auto', ...attrs }, ...children);

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function seconds(s) {
  if (s == null) return '–';
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(s < 10 ? 2 : 1)} s`;
}

/** A server timestamp (UTC, no zone) in the reader's local time. */
export function when(iso) {
  if (!iso) return '';
  const d = new Date(/[zZ]|[+-]\d\d:?\d\d$/.test(iso) ? iso : `${iso}Z`);
  if (Number.isNaN(d.getTime())) return iso;
  const today = new Date().toDateString() === d.toDateString();
  return today
    ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    : d.toLocaleDateString([], { day: 'numeric', month: 'short', year: 'numeric' });
}

export function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

/** A short, one-line rendering of a JSON value. */
export function brief(v, max = 160) {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s && s.length > max ? `${s.slice(0, max - 1)}…` : s ?? '';
}

/** "Working… 12 s" beside a long request; returns the function that stops it. */
export function ticker(el, label = 'Working') {
  const started = Date.now();
  const tick = () => {
    el.textContent = `${label}… ${Math.floor((Date.now() - started) / 1000)} s`;
  };
  tick();
  const id = setInterval(tick, 1000);
  return () => clearInterval(id);
}

const count = (n) => n.toLocaleString('en');

/**
 * The length limit of a text field, said in words: a counter that shows from 80% of the
 * limit (red past it), and `problem(text)`, why `text` cannot be sent (empty, or too long:
 * never cut without a word), or null.
 */
export function lengthGuard(field, max, noun) {
  const el = h('small', { class: 'counter', 'aria-live': 'polite', hidden: true });
  const update = () => {
    const n = field.value.length;
    el.hidden = n < max * 0.8;
    el.classList.toggle('over', n > max);
    el.textContent = n > max
      ? `${count(n)} / ${count(max)} characters: ${count(n - max)} too many`
      : `${count(n)} / ${count(max)} characters`;
  };
  field.addEventListener('input', update);
  const problem = (text) => {
    if (!text) return `Write a ${noun} first.`;
    if (text.length > max) {
      return `This ${noun} is ${count(text.length)} characters long; the limit is ${count(max)}. `
        + 'Shorten it: nothing was sent.';
    }
    return null;
  };
  return { el, update, problem };
}

/** A status line that screen readers announce. */
export function notice(kind, text) {
  return h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

/** A modal dialog; resolves with the value of the button that closed it. */
export function modal({ title, body, actions, wide = false, onopen }) {
  return new Promise((resolve) => {
    const dlg = h('dialog', { class: wide ? 'wide' : '', 'aria-label': title });
    const close = (value) => { dlg.close(); dlg.remove(); resolve(value); };
    const buttons = actions.map((a) => h('button', {
      type: 'button',
      class: a.class || '',
      'data-value': a.value,
      onclick: () => close(a.value),
    }, a.label));
    dlg.append(
      h('header', {}, h('h2', {}, title),
        h('button', { type: 'button', class: 'icon', 'aria-label': 'Close', onclick: () => close(null) }, '×')),
      h('div', { class: 'dialog-body' }, body),
      h('footer', {}, buttons),
    );
    dlg.addEventListener('cancel', (e) => { e.preventDefault(); close(null); });
    document.body.append(dlg);
    dlg.showModal();
    if (onopen) onopen(dlg, close);
  });
}

/** Asks before something that cannot be undone. */
export async function confirmDanger(title, text, label = 'Delete') {
  const v = await modal({
    title,
    body: h('p', {}, text),
    actions: [
      { label: 'Cancel', value: 'cancel' },
      { label, value: 'ok', class: 'danger' },
    ],
  });
  return v === 'ok';
}
