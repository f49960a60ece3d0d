// Onboarding for a new install (administrators): the assistant API's questions one by
// one, with Back to change an earlier answer, the generated configuration for review,
// then applying it. The session is remembered (per person, in this browser) until it is
// applied, so leaving the page and coming back continues where it stopped.

import { h, fill, auto, notice, brief } from './dom.js';
import * as api from './api.js';
import {
  label, optionLabel, humanMessage, valueInWords,
} from './labels.js';

const storageKey = (ctx) => `ragd.onboarding.${ctx.user?.email || ''}`;

/** The field of question `q`, filled with `value` when it was answered before. */
function input(q, value) {
  const id = `answer-${q.key}`;
  const v = q.validation || {};
  const answered = value !== undefined && value !== null;
  const name = (o) => optionLabel(q.key, o);
  if (q.type === 'choice' && q.options.length > 5) {
    const el = h('select', { id, 'aria-label': q.text }, h('option', { value: '' }, 'Choose…'),
      q.options.map((o) => h('option', { value: o, selected: o === value }, name(o))));
    return { el, read: () => el.value };
  }
  if (q.type === 'choice') {
    const radios = q.options.map((o, i) => h('input', {
      type: 'radio', name: id, value: o, id: `${id}-${o}`, checked: answered ? o === value : i === 0,
    }));
    const el = h('div', { class: 'choices', role: 'radiogroup', 'aria-label': q.text },
      radios.map((r) => h('label', { for: r.id }, r, ` ${name(r.value)}`)));
    return { el, read: () => radios.find((r) => r.checked)?.value || '' };
  }
  if (q.type === 'multi_choice') {
    const boxes = q.options.map((o) => h('input', {
      type: 'checkbox', value: o, id: `${id}-${o}`, checked: answered ? value.includes(o) : true,
    }));
    const el = h('div', { class: 'choices', role: 'group', 'aria-label': q.text },
      boxes.map((b) => h('label', { for: b.id }, b, ` ${name(b.value)}`)));
    return { el, read: () => boxes.filter((b) => b.checked).map((b) => b.value) };
  }
  if (q.type === 'boolean') {
    const box = h('input', { type: 'checkbox', id, checked: value === true });
    return { el: h('label', { for: id, class: 'check' }, box, ' Yes'), read: () => box.checked };
  }
  if (q.type === 'url_list') {
    const el = h('textarea', {
      id, rows: 3, placeholder: 'One web address per line', 'aria-label': q.text, value: answered ? value.join('\n') : '',
    });
    return { el, read: () => el.value.split(/\s+/).map((s) => s.trim()).filter(Boolean) };
  }
  const long = (v.max_length || 0) > 200;
  const el = auto(long ? 'textarea' : 'input', {
    id, rows: long ? 4 : null, maxlength: v.max_length, 'aria-label': q.text, value: answered ? String(value) : '',
  });
  return { el, read: () => el.value.trim() };
}

/** A review value in words. */
function shown(key, v) {
  return valueInWords(key, v) ?? brief(v, 300);
}

export function setupView(root, ctx) {
  const box = h('section', { class: 'panel setup', id: 'setup', 'aria-live': 'polite' });
  root.append(box);
  const KEY = storageKey(ctx);

  async function call(op, params) {
    try {
      const view = await api.op(op, params);
      localStorage.setItem(KEY, view.session_id);
      render(view);
    } catch (e) {
      box.append(notice('error', humanMessage(e.message)));
    }
  }

  /** Question `q` of `view`, with its earlier answer, Back (but on the first) and Skip. */
  function question(view, q) {
    const questions = view.questions || [q];
    const at = questions.findIndex((x) => x.key === q.key);
    const field = input(q, view.answers?.[q.key]);
    const problem = h('div');
    const submit = (answer) => async (e) => {
      e?.preventDefault();
      try {
        const next = await api.op('submit_onboarding_answer', { session_id: view.session_id, question_key: q.key, answer });
        // Going forward again through answers given before: each shows what was given.
        const following = questions[at + 1];
        if (following && next.status !== 'completed' && Object.hasOwn(next.answers || {}, following.key)) {
          render(next, following.key);
        } else {
          render(next);
        }
      } catch (err) {
        fill(problem, notice('error', humanMessage(err.message, q.key)));
      }
    };
    const back = at > 0
      ? h('button', { type: 'button', id: 'setup-back', onclick: () => render(view, questions[at - 1].key) }, 'Back')
      : null;
    return h('form', { class: 'stack', id: 'setup-question', 'data-key': q.key, onsubmit: (e) => submit(field.read())(e) },
      h('label', { class: 'question', for: field.el.id || null }, q.text, q.required ? '' : h('small', { class: 'muted' }, ' (optional)')),
      field.el, problem,
      h('div', { class: 'row' }, back, h('button', { type: 'submit', class: 'primary' }, 'Continue'),
        q.required ? null : h('button', { type: 'button', class: 'skip-question', onclick: submit(q.type === 'url_list' ? [] : '') }, 'Skip')));
  }

  function review(view) {
    const settings = view.configuration?.settings || {};
    const last = view.questions?.at(-1);
    return h('div', { class: 'stack', id: 'setup-review' },
      h('h3', {}, 'Review'),
      h('p', {}, 'This is the configuration your answers make. Nothing is changed until you apply it.'),
      h('dl', { class: 'meta' }, Object.entries(settings).map(([k, v]) => [h('dt', {}, label(k)), auto('dd', {}, shown(k, v))])),
      h('div', { class: 'row' },
        last ? h('button', { type: 'button', id: 'setup-back', onclick: () => render(view, last.key) }, 'Back') : null,
        h('button', { type: 'button', class: 'primary', id: 'setup-apply', onclick: () => call('execute_onboarding_configuration', { session_id: view.session_id }) }, 'Apply'),
        h('button', { type: 'button', onclick: () => call('start_onboarding', {}) }, 'Start over')));
  }

  /** The session's state, at question `key` when given (going back or forward). */
  function render(view, key) {
    const p = view.progress || { answered: 0, total: 1 };
    const asked = key && view.questions?.find((q) => q.key === key);
    let body;
    if (asked && (view.status === 'in_progress' || view.status === 'review')) body = question(view, asked);
    else if (view.status === 'in_progress' && view.question) body = question(view, view.question);
    else if (view.status === 'review') body = review(view);
    else if (view.status === 'completed') {
      localStorage.removeItem(KEY);
      ctx.refreshConfig();
      const tasks = view.result?.scrape_tasks || [];
      body = h('div', { class: 'stack', id: 'setup-done' },
        notice('ok', 'This installation is set up.'),
        tasks.length ? h('p', {}, `${tasks.length} web pages are being added in the background.`) : null,
        h('a', { class: 'button primary', href: '#/documents' }, 'Go to documents'));
    } else {
      localStorage.removeItem(KEY);
      body = h('div', { class: 'stack' }, notice('error', humanMessage(view.error || `Setup ${view.status}`)),
        h('button', { type: 'button', onclick: () => call('start_onboarding', {}) }, 'Start over'));
    }
    fill(box,
      h('div', { class: 'panel-head' }, h('h2', {}, 'Set up this installation'),
        h('span', { class: 'muted', id: 'setup-progress' }, `${p.answered} of ${p.total} answered`)),
      h('progress', { max: p.total, value: p.answered, 'aria-label': 'Setup progress' }),
      body);
    box.querySelector('input, select, textarea, button.primary')?.focus();
  }

  (async () => {
    const saved = localStorage.getItem(KEY);
    if (saved) {
      try {
        const view = await api.op('get_onboarding_status', { session_id: saved }, { method: 'GET' });
        if (view.status === 'in_progress' || view.status === 'review') return render(view);
      } catch {
        // Gone or someone else's: start a new one.
      }
    }
    return call('start_onboarding', {});
  })();
}
