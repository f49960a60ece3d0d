// Settings (administrators): the assistant's settings and the server's configuration as
// get_settings reports them (secrets masked), and the health of each component.

import { h, fill, auto, notice, brief } from './dom.js';
import * as api from './api.js';

function table(obj) {
  return h('table', { class: 'list kv' }, h('tbody', {}, Object.entries(obj).map(([k, v]) => h('tr', {},
    h('th', { scope: 'row' }, k.replaceAll('_', ' ')),
    auto('td', {}, v === null || v === '' ? '—' : Array.isArray(v) ? v.join(', ') || '—' : brief(v, 400))))));
}

export function settingsView(root) {
  const health = h('section', { class: 'panel', id: 'health' }, h('h2', {}, 'Health'), h('p', { class: 'muted' }, 'Loading…'));
  const assistant = h('section', { class: 'panel', id: 'assistant-settings' }, h('h2', {}, 'Assistant'));
  const server = h('section', { class: 'panel', id: 'server-settings' }, h('h2', {}, 'Server'));
  root.append(h('div', { class: 'grid two' }, health, assistant), server);

  (async () => {
    try {
      const [ready, stats] = await Promise.all([api.kb('GET', '/health/ready'), api.kb('GET', '/health/stats')]);
      fill(health, h('h2', {}, 'Health'),
        h('p', {}, ready.ready ? notice('ok', 'Ready') : notice('error', 'Not ready')),
        h('ul', { class: 'components' }, ready.components.map((c) => h('li', {},
          h('span', { class: `badge ${c.healthy ? 'executed' : 'failed'}` }, c.healthy ? 'healthy' : 'not healthy'),
          ` ${c.name}`, !c.healthy && c.detail ? h('small', { class: 'muted' }, ` — ${c.detail}`) : null))),
        table({
          documents: stats.document_count,
          sources: stats.sources_count,
          embedding_model: stats.embedding_model,
          llm_model: stats.llm_model,
          reranker: stats.reranker_enabled ? 'on' : 'off',
          api_keys: stats.api_auth_enabled ? 'required for /api/v1 (this page uses your session)' : 'off',
        }));
    } catch (e) {
      fill(health, h('h2', {}, 'Health'), notice('error', e.message));
    }
    try {
      const s = await api.op('get_settings', {}, { method: 'GET' });
      assistant.append(table(s.settings),
        h('p', { class: 'hint' }, 'Change these by running setup again, or with the ', h('code', {}, 'update_setting'),
          ' tool in Chat (it waits for your confirmation).'),
        h('a', { class: 'button', href: '#/setup' }, 'Run setup'));
      server.append(table(s.server), h('p', { class: 'hint' }, 'Server settings come from ragd.toml, the environment and flags; secrets are masked.'));
    } catch (e) {
      assistant.append(notice('error', e.message));
    }
  })();
}
