// Settings (administrators): the assistant's settings and the server's configuration as
// get_settings reports them (secrets masked), the health of each component, and the
// installed LLM files with a switch between the runnable ones (list_models, then the
// update_setting tool for llm_model, confirmed by the click itself).

import { h, fill, auto, notice, brief, bytes } from './dom.js';
import * as api from './api.js';
import { label, valueInWords } from './labels.js';

/** A table of settings; `words` shows values as words (Yes, English) rather than as stored. */
function table(obj, { words = false } = {}) {
  const value = (k, v) => {
    if (words) return valueInWords(k, v) ?? brief(v, 400);
    return v === null || v === '' ? '—' : Array.isArray(v) ? v.join(', ') || '—' : brief(v, 400);
  };
  return h('table', { class: 'list kv' }, h('tbody', {}, Object.entries(obj).map(([k, v]) => h('tr', { 'data-key': k },
    h('th', { scope: 'row' }, label(k)),
    auto('td', {}, value(k, v))))));
}

export function settingsView(root) {
  const health = h('section', { class: 'panel', id: 'health' }, h('h2', {}, 'Health'), h('p', { class: 'muted' }, 'Loading…'));
  const assistant = h('section', { class: 'panel', id: 'assistant-settings' }, h('h2', {}, 'Assistant'));
  const server = h('section', { class: 'panel', id: 'server-settings' }, h('h2', {}, 'Server'));
  const models = h('section', { class: 'panel', id: 'llm-models' }, h('h2', {}, 'Language model'), h('p', { class: 'muted' }, 'Loading…'));
  root.append(h('div', { class: 'grid two' }, health, assistant), models, server);
  // After a switch the health and server panels name the new file too.
  modelsPanel(models, () => { healthPanel(health); settingsPanels(assistant, server); });
  healthPanel(health);
  settingsPanels(assistant, server);
}

async function healthPanel(health) {
  try {
    const [ready, stats] = await Promise.all([api.kb('GET', '/health/ready'), api.kb('GET', '/health/stats')]);
    fill(health, h('h2', {}, 'Health'),
      h('p', {}, ready.ready ? notice('ok', 'Ready') : notice('error', 'Not ready')),
      h('ul', { class: 'components' }, ready.components.map((c) => {
        // An optional model that is not installed is not a fault: grey, in words.
        const state = c.installed === false ? ['absent', 'not installed'] : c.healthy ? ['executed', 'healthy'] : ['failed', 'not healthy'];
        return h('li', { 'data-component': c.name, 'data-state': state[1] },
          h('span', { class: `badge ${state[0]}` }, state[1]),
          ` ${label(c.name)}`, !c.healthy && c.detail ? h('small', { class: 'muted' }, ` — ${c.detail}`) : null);
      })),
      table({
        sources: stats.sources_count,
        passages: stats.document_count,
        embedding_model: stats.embedding_model,
        llm_model: stats.llm_model,
        reranker: stats.reranker_enabled ? 'on' : 'off',
        api_keys: stats.api_auth_enabled ? 'required for /api/v1 (this page uses your session)' : 'off',
      }));
  } catch (e) {
    fill(health, h('h2', {}, 'Health'), notice('error', e.message));
  }
}

async function settingsPanels(assistant, server) {
  try {
    const s = await api.op('get_settings', {}, { method: 'GET' });
    fill(assistant, h('h2', {}, 'Assistant'), table(s.settings, { words: true }),
      h('p', { class: 'hint' }, 'Change these by running setup again, or with the ', h('code', {}, 'update_setting'),
        ' tool in Chat (it waits for your confirmation).'),
      h('a', { class: 'button', href: '#/setup' }, 'Run setup'));
    fill(server, h('h2', {}, 'Server'), table(s.server),
      h('p', { class: 'hint' }, 'Server settings come from ragd.toml, the environment and flags; secrets are masked.'));
  } catch (e) {
    fill(assistant, h('h2', {}, 'Assistant'), notice('error', e.message));
  }
}

function count(n) {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}B`;
  if (n >= 1e6) return `${Math.round(n / 1e6)}M`;
  return `${Math.round(n / 1e3)}K`;
}

/** The installed GGUF files and a select of the runnable ones to switch to. */
async function modelsPanel(panel, switched) {
  const title = h('h2', {}, 'Language model');
  let list;
  try {
    list = await api.op('list_models', {}, { method: 'GET' });
  } catch (e) {
    fill(panel, title, notice('error', e.message));
    return;
  }
  const rows = list.models.map((m) => h('tr', { class: m.active ? 'active' : '' },
    h('td', {}, m.active ? h('strong', {}, m.llm_model) : m.llm_model, m.active ? h('small', { class: 'muted' }, ' (active)') : null),
    h('td', {}, m.architecture || '?'), h('td', {}, m.parameters ? count(m.parameters) : '—'), h('td', {}, m.quantization || '—'),
    h('td', {}, m.context_length ?? '—'), h('td', {}, bytes(m.size_bytes)),
    h('td', {}, m.runnable ? h('span', { class: 'badge executed' }, 'runs') : h('span', { class: 'badge failed' }, 'cannot run'),
      m.reason ? h('small', { class: 'muted' }, ` ${m.reason}`) : null)));
  const runnable = list.models.filter((m) => m.runnable);
  const select = h('select', { id: 'llm-model-select', 'aria-label': 'LLM file' },
    runnable.map((m) => h('option', { value: m.llm_model, selected: m.active }, m.llm_model)));
  const status = h('div', { class: 'switch-status', 'aria-live': 'polite' });
  const button = h('button', { type: 'button', id: 'llm-switch' }, 'Switch model');
  button.addEventListener('click', async () => {
    button.disabled = true;
    fill(status, h('p', { class: 'muted' }, `Loading ${select.value} beside the running model…`));
    try {
      const proposed = await api.op('execute_tool', { tool_name: 'update_setting', params: { key: 'llm_model', value: select.value } });
      const done = proposed.requires_confirmation
        ? await api.op('confirm_action', { action_id: proposed.action_id })
        : proposed;
      if (done.success === false) throw new Error(done.error || 'the switch failed');
      await modelsPanel(panel, switched);
      switched();
      panel.append(notice('ok', `Now answering with ${done.result?.model?.name || select.value}.`));
    } catch (e) {
      button.disabled = false;
      fill(status, notice('error', e.message));
    }
  });
  fill(panel, title,
    list.llm_failure ? notice('error', `The configured model cannot run: ${list.llm_failure}. Answers are extractive.`) : null,
    h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, ['File', 'Architecture', 'Parameters', 'Quantization', 'Context', 'Size', 'Runs'].map((c) => h('th', {}, c)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 7 }, 'No GGUF files in the models folder.')))),
    list.can_switch && runnable.length
      ? h('p', { class: 'switch' }, select, ' ', button,
        h('small', { class: 'muted' }, ' Running answers finish on the current model; the new one loads beside it.'))
      : h('p', { class: 'hint' }, list.can_switch ? 'No runnable model to switch to.' : 'The LLM is a remote server: switch it there.'),
    status);
}
