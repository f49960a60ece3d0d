// Onboarding for a new install (administrators): the assistant API's questions one by
// one, the generated configuration for review, then applying it.

import { h, fill, auto, notice, brief } from './dom.js';
import * as api from './api.js';

const KEY = 'ragd.onboarding';

function input(q) {
  const id = `answer-${q.key}`;
  const v = q.validation || {};
  if (q.type === 'choice' && q.options.length > 5) {
    const el = h('select', { id, 'aria-label': q.text }, h('option', { value: '' }, 'Choose…'), q.options.map((o) => h('option', { value: o }, o)));
    return { el, read: () => el.value };
  }
  if (q.type === 'choice') {
    const radios = q.options.map((o, i) => h('input', { type: 'radio', name: id, value: o, id: `${id}-${o}`, checked: i === 0 }));
    const el = h('div', { class: 'choices', role: 'radiogroup', 'aria-label': q.text },
      radios.map((r) => h('label', { for: r.id }, r, ` ${r.value}`)));
    return { el, read: () => radios.find((r) => r.checked)?.value || '' };
  }
  if (q.type === 'multi_choice') {
    const boxes = q.options.map((o) => h('input', { type: 'checkbox', value: o, id: `${id}-${o}`, checked: true }));
    const el = h('div', { class: 'choices', role: 'group', 'aria-label': q.text },
      boxes.map((b) => h('label', { for: b.id }, b, ` ${b.value.replace('_', ' ')}`)));
    return { el, read: () => boxes.filter((b) => b.checked).map((b) => b.value) };
  }
  if (q.type === 'boolean') {
    const box = h('input', { type: 'checkbox', id });
    return { el: h('label', { for: id, class: 'check' }, box, ' Yes'), read: () => box.checked };
  }
  if (q.type === 'url_list') {
    const el = h('textarea', { id, rows: 3, placeholder: 'One web address per line', 'aria-label': q.text });
    return { el, read: () => el.value.split(/\s+/).map((s) => s.trim()).filter(Boolean) };
  }
  const long = (v.max_length || 0) > 200;
  const el = auto(long ? 'textarea' : 'input', { id, rows: long ? 4 : null, maxlength: v.max_length, 'aria-label': q.text });
  return { el, read: () => el.value.trim() };
}

export function setupView(root, ctx) {
  const box = h('section', { class: 'panel setup', id: 'setup', 'aria-live': 'polite' });
  root.append(box);

  async function call(op, params) {
    try {
      const view = await api.op(op, params);
      sessionStorage.setItem(KEY, view.session_id);
      render(view);
    } catch (e) {
      box.append(notice('error', e.message));
    }
  }

  function question(view) {
    const q = view.question;
    const field = input(q);
    const problem = h('div');
    const submit = (answer) => async (e) => {
      e?.preventDefault();
      try {
        render(await api.op('submit_onboarding_answer', { session_id: view.session_id, question_key: q.key, answer }));
      } catch (err) {
        fill(problem, notice('error', err.message));
      }
    };
    const form = h('form', { class: 'stack', id: 'setup-question', 'data-key': q.key, onsubmit: (e) => submit(field.read())(e) },
      h('label', { class: 'question', for: field.el.id || null }, q.text, q.required ? '' : h('small', { class: 'muted' }, ' (optional)')),
      field.el, problem,
      h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, 'Continue'),
        q.required ? null : h('button', { type: 'button', onclick: submit(q.type === 'url_list' ? [] : '') }, 'Skip')));
    return form;
  }

  function review(view) {
    const settings = view.configuration?.settings || {};
    return h('div', { class: 'stack', id: 'setup-review' },
      h('h3', {}, 'Review'),
      h('p', {}, 'This is the configuration your answers make. Nothing is changed until you apply it.'),
      h('dl', { class: 'meta' }, Object.entries(settings).map(([k, v]) => [h('dt', {}, k.replaceAll('_', ' ')), auto('dd', {}, Array.isArray(v) ? v.join(', ') || '—' : brief(v, 300))])),
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'primary', id: 'setup-apply', onclick: () => call('execute_onboarding_configuration', { session_id: view.session_id }) }, 'Apply'),
        h('button', { type: 'button', onclick: () => call('start_onboarding', {}) }, 'Start over')));
  }

  function render(view) {
    const p = view.progress || { answered: 0, total: 1 };
    let body;
    if (view.status === 'in_progress' && view.question) body = question(view);
    else if (view.status === 'review') body = review(view);
    else if (view.status === 'completed') {
      sessionStorage.removeItem(KEY);
      ctx.refreshConfig();
      const tasks = view.result?.scrape_tasks || [];
      body = h('div', { class: 'stack', id: 'setup-done' },
        notice('ok', 'This installation is set up.'),
        tasks.length ? h('p', {}, `${tasks.length} web pages are being added in the background.`) : null,
        h('a', { class: 'button primary', href: '#/documents' }, 'Go to documents'));
    } else {
      sessionStorage.removeItem(KEY);
      body = h('div', { class: 'stack' }, notice('error', view.error || `Setup ${view.status}.`),
        h('button', { type: 'button', onclick: () => call('start_onboarding', {}) }, 'Start over'));
    }
    fill(box,
      h('div', { class: 'panel-head' }, h('h2', {}, 'Set up this installation'),
        h('span', { class: 'muted' }, `${p.answered} of ${p.total} answered`)),
      h('progress', { max: p.total, value: p.answered, 'aria-label': 'Setup progress' }),
      body);
    box.querySelector('input, select, textarea, button.primary')?.focus();
  }

  (async () => {
    const saved = sessionStorage.getItem(KEY);
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
