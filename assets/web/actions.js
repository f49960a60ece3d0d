// Tool calls and held actions: a card per call that follows it as it happens, Confirm /
// Reject (with a reason) on a held high-risk action, the list of actions waiting for a
// decision, and the dialog that runs a tool directly (execute_tool).

import { h, fill, auto, brief, notice, modal, seconds } from './dom.js';
import * as api from './api.js';

const LABELS = {
  running: 'Running…',
  executed: 'Done',
  failed: 'Failed',
  proposed: 'Proposed (not run)',
  pending_confirmation: 'Waiting for your confirmation',
  pending: 'Waiting for your confirmation',
  rejected: 'Rejected',
  expired: 'Expired',
  executing: 'Running…',
  closed: 'Decided or expired',
};

/** A call's arguments as words: "source: a.md, top k: 3". */
function argumentsLine(params) {
  return Object.entries(params || {}).map(([k, v]) => `${k.replaceAll('_', ' ')}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(', ');
}

/** Pretty JSON, cut when long. */
function json(v, max = 4000) {
  const s = typeof v === 'string' ? v : JSON.stringify(v, null, 2);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/**
 * A tool call's card: one line (name, status, time), the parameters and the result as
 * JSON behind "Details"; a held call also says what it will do and offers Confirm /
 * Reject. `update` moves it to a new state.
 */
export function toolCard(call, { onDecided = () => {} } = {}) {
  const el = h('div', { class: 'tool', 'data-tool': call.tool_name });
  let open = false;
  const update = (c) => {
    Object.assign(call, c);
    const status = call.status || 'running';
    el.dataset.status = status;
    if (call.action_id) el.dataset.action = call.action_id;
    const waiting = status === 'pending_confirmation' || status === 'pending';
    const hasParams = call.params && Object.keys(call.params).length > 0;
    const hasResult = call.result != null && status !== 'running';
    const body = h('div', { class: 'tool-body', hidden: !open },
      hasParams ? [h('div', { class: 'label' }, 'Parameters'), auto('pre', { class: 'params' }, json(call.params))] : null,
      hasResult ? [h('div', { class: 'label' }, 'Result'), auto('pre', { class: 'result' }, json(call.result))] : null);
    const toggle = hasParams || hasResult
      ? h('button', {
        type: 'button',
        class: 'link details-toggle',
        'aria-expanded': String(open),
        onclick: (e) => {
          open = !open;
          body.hidden = !open;
          e.currentTarget.setAttribute('aria-expanded', String(open));
          e.currentTarget.textContent = open ? 'Hide details' : 'Details';
        },
      }, open ? 'Hide details' : 'Details')
      : null;
    fill(el,
      h('div', { class: 'tool-head' },
        h('span', { class: 'tool-icon', 'aria-hidden': 'true' }, waiting ? '!' : '⚙'),
        h('code', { class: 'tool-name' }, call.tool_name || 'tool'),
        h('span', { class: `badge ${status}` }, LABELS[status] || status),
        call.execution_time_ms ? h('span', { class: 'muted' }, seconds(call.execution_time_ms / 1000)) : null,
        toggle),
      waiting && hasParams ? auto('p', { class: 'args' }, argumentsLine(call.params)) : null,
      waiting ? h('p', { class: 'why' }, 'This is a high-risk action: it runs only if you confirm it.') : null,
      call.error ? notice('error', brief(call.error, 300)) : null,
      call.reason ? auto('p', { class: 'muted' }, `Reason: ${call.reason}`) : null,
      body,
      waiting && call.action_id ? decision(call, update, onDecided) : null);
  };
  update(call);
  return { el, update, call };
}

function decision(call, update, onDecided) {
  const reason = h('input', {
    type: 'text', class: 'reason', maxlength: 1000, placeholder: 'Reason for rejecting (optional)', 'aria-label': 'Reason for rejecting',
  });
  const problem = h('div');
  const buttons = [];
  const decide = async (confirm) => {
    for (const b of buttons) b.disabled = true;
    try {
      const r = confirm
        ? await api.op('confirm_action', { action_id: call.action_id })
        : await api.op('reject_action', { action_id: call.action_id, reason: reason.value.trim() || undefined });
      update({
        status: r.status, result: r.result ?? null, error: r.error ?? null, reason: r.reason ?? null,
        execution_time_ms: r.execution_time_ms ?? call.execution_time_ms,
      });
      onDecided(call);
    } catch (e) {
      for (const b of buttons) b.disabled = false;
      fill(problem, notice('error', e.status === 409 ? `${e.message} (it was already decided or has expired)` : e.message));
    }
  };
  buttons.push(
    h('button', { type: 'button', class: 'primary confirm', onclick: () => decide(true) }, 'Confirm'),
    h('button', { type: 'button', class: 'danger reject', onclick: () => decide(false) }, 'Reject'),
  );
  return h('div', { class: 'decide' }, buttons, reason, problem);
}

/** The caller's actions waiting for a decision, as cards; refreshes itself. */
export function pendingPanel(onDecided = () => {}) {
  const el = h('section', { class: 'pending', id: 'pending', 'aria-live': 'polite', hidden: true });
  async function load() {
    try {
      const { actions } = await api.op('list_pending_actions', {}, { method: 'GET' });
      el.hidden = actions.length === 0;
      fill(el, h('h3', {}, `Waiting for your confirmation (${actions.length})`),
        actions.map((a) => toolCard({ ...a }, { onDecided: () => load().then(() => onDecided(a)) }).el));
      return actions;
    } catch {
      return [];
    }
  }
  return { el, load };
}

function field(name, schema, required) {
  const id = `param-${name}`;
  const label = h('label', { for: id }, name, required ? ' *' : '', schema.description ? h('small', {}, ` ${schema.description}`) : null);
  let input;
  if (schema.enum) {
    input = h('select', { id }, required ? null : h('option', { value: '' }, '—'),
      schema.enum.map((v) => h('option', { value: v, selected: v === schema.default }, v)));
  } else if (schema.type === 'integer' || schema.type === 'number') {
    input = h('input', { id, type: 'number', min: schema.minimum, max: schema.maximum, step: schema.type === 'integer' ? 1 : 'any', placeholder: schema.default ?? '' });
  } else if (schema.type === 'boolean') {
    input = h('input', { id, type: 'checkbox', checked: schema.default === true });
  } else if (schema.type === 'string') {
    input = auto('input', { id, type: 'text', maxlength: schema.maxLength, placeholder: schema.default ?? '' });
  } else {
    input = h('textarea', { id, rows: 3, placeholder: 'JSON, for example {"language": "en"}' });
  }
  const read = () => {
    if (schema.type === 'boolean') return input.checked;
    const v = input.value.trim();
    if (v === '') return undefined;
    if (schema.enum || schema.type === 'string') return v;
    if (schema.type === 'integer' || schema.type === 'number') return Number(v);
    try {
      return JSON.parse(v);
    } catch {
      return v;
    }
  };
  return { el: h('div', { class: 'field' }, label, input), read };
}

/** Picks a tool, fills its parameters from its schema, runs it; resolves with the call. */
export async function runToolDialog() {
  const { tools } = await api.op('get_available_tools', { include_schema: true }, { method: 'GET' });
  const select = h('select', { id: 'tool-select', 'aria-label': 'Tool' },
    tools.map((t) => h('option', { value: t.tool_name }, `${t.tool_name} (${t.category.replace('_', ' ')}, ${t.risk} risk)`)));
  const about = h('p', { class: 'muted', id: 'tool-about' });
  const form = h('div', { class: 'fields', id: 'tool-fields' });
  let fields = [];
  const show = () => {
    const t = tools.find((x) => x.tool_name === select.value);
    fill(about, t.description, t.requires_confirmation ? h('strong', {}, ' It waits for your confirmation.') : '');
    const props = t.schema?.properties || {};
    const required = new Set(t.schema?.required || []);
    fields = Object.entries(props).map(([name, s]) => ({ name, ...field(name, s, required.has(name)) }));
    fill(form, fields.length ? fields.map((f) => f.el) : h('p', { class: 'muted' }, 'This tool takes no parameters.'));
  };
  select.addEventListener('change', show);
  show();
  const choice = await modal({
    title: 'Run a tool',
    body: h('div', { class: 'stack' }, select, about, form),
    actions: [{ label: 'Cancel', value: 'cancel' }, { label: 'Run', value: 'run', class: 'primary' }],
  });
  if (choice !== 'run') return null;
  const params = {};
  for (const f of fields) {
    const v = f.read();
    if (v !== undefined) params[f.name] = v;
  }
  const call = { tool_name: select.value, params, status: 'running' };
  try {
    const r = await api.op('execute_tool', { tool_name: select.value, params });
    let status = 'failed';
    if (r.requires_confirmation) status = 'pending_confirmation';
    else if (r.success) status = 'executed';
    return { ...call, ...r, status };
  } catch (e) {
    return { ...call, status: 'failed', error: e.message };
  }
}
