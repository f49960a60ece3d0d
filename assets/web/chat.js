// Chat: the caller's conversations (new, delete, full-text search over the history,
// a hit opening its message), a thread with replies streamed from stream_ai_response and
// shown as Markdown with their citations and sources (kept when the conversation is
// reopened), tool calls shown as they happen, held high-risk actions with Confirm /
// Reject, and a dialog to run a tool directly.

import {
  h, fill, auto, notice, confirmDanger, ticker, when, plural, lengthGuard,
} from './dom.js';
import * as api from './api.js';
import { citeButton, sourceList, modeTitle, refused } from './ask.js';
import { toolCard, pendingPanel, runToolDialog } from './actions.js';
import { markdown } from './markdown.js';

const STREAM_URL = '/api/method/assistant.api.stream_ai_response';
/** Longest message the page sends. */
const MAX_MESSAGE_CHARS = 8000;
/** The history search, kept while the reader opens its hits. */
let lastQuery = '';

/** What became of a held call, in the words of a reply. */
const OUTCOME = {
  executed: 'was confirmed and done',
  failed: 'was confirmed but failed',
  rejected: 'was rejected',
  expired: 'expired without a decision',
  closed: 'was decided or has expired',
};

/**
 * A reply's text with each sentence that says a call waits for confirmation brought up
 * to date with the call (and no action id, which older replies named).
 */
function settle(text, calls) {
  let out = text;
  for (const c of calls) {
    if (!c.tool_name) continue;
    const name = c.tool_name.replace(/[^\w]/g, '\\$&');
    const held = new RegExp(`${name}( \\([^\\n]*?\\))? (?:waits for|needs) your confirmation(?: \\(action [0-9a-f-]+\\))?\\.`);
    const outcome = OUTCOME[c.status];
    out = out.replace(held, (_, args = '') => (outcome
      ? `${c.tool_name}${args} ${outcome}.`
      : `${c.tool_name}${args} waits for your confirmation.`));
  }
  return out;
}

/** A search snippet: the server's escaped excerpt, keeping only its <b> highlights. */
function snippet(html) {
  const t = document.createElement('template');
  t.innerHTML = html;
  return auto('span', { class: 'snippet' }, [...t.content.childNodes].map((n) => (
    n.nodeName === 'B' ? h('mark', {}, n.textContent) : n.textContent)));
}

function bubble(role, text, messageId) {
  const body = auto('div', { class: 'text' }, text);
  const tools = h('div', { class: 'tools' });
  const el = h('article', { class: `message ${role}`, 'data-role': role, 'data-message': messageId },
    h('div', { class: 'who' }, role === 'user' ? 'You' : 'Assistant'), body, tools);
  // What a finished reply shows: its text, sources, mode and tool calls.
  const state = { done: false, text: text || '', sources: [], calls: [] };
  return { el, body, tools, state };
}

/** A finished reply: Markdown with citations, its mode, its sources. */
function renderReply(b) {
  const { text, sources = [], calls = [] } = b.state;
  fill(b.body, markdown(settle(text, calls), (n) => citeButton(sources, n)));
  b.body.classList.add('md');
  b.el.querySelector('.who .chip')?.remove();
  b.el.querySelector('.reply-sources')?.remove();
  // A knowledge-base answer says where its sentences come from.
  if (b.state.grounding && b.state.answer_mode) {
    const mode = modeTitle(b.state);
    b.el.querySelector('.who').append(' ', h('span', { class: 'chip', title: mode, 'aria-label': `${b.state.answer_mode}: ${mode}` }, b.state.answer_mode));
  }
  if (sources.length) {
    // A refusal's passages are only the closest ones, not sources.
    const label = refused(b.state) ? `Closest passages (${sources.length})` : plural(sources.length, 'source');
    b.body.after(h('details', { class: 'reply-sources' }, h('summary', {}, label), sourceList(sources)));
  }
}

export function chatView(root, ctx, [conversationId, messageId]) {
  let current = conversationId || null;
  let controller = null;
  const stop = new AbortController();
  const list = h('nav', { class: 'conversation-list', id: 'conversation-list', 'aria-label': 'Conversations' });
  const search = h('input', {
    type: 'search', id: 'history-search', placeholder: 'Search all conversations', 'aria-label': 'Search all conversations', value: lastQuery,
  });
  const title = auto('h2', { id: 'thread-title' }, 'New conversation');
  const messages = h('div', { class: 'messages', id: 'messages', 'aria-live': 'polite' });
  const status = h('span', { class: 'muted', id: 'chat-status' });
  const input = auto('textarea', { id: 'chat-input', rows: 2, placeholder: 'Write a message', 'aria-label': 'Message' });
  const guard = lengthGuard(input, MAX_MESSAGE_CHARS, 'message');
  const problem = h('div', { id: 'chat-problem' });
  input.addEventListener('input', () => fill(problem));
  const sendButton = h('button', { type: 'submit', class: 'primary', id: 'send-button' }, 'Send');
  const stopButton = h('button', { type: 'button', id: 'chat-stop', hidden: true, onclick: () => controller?.abort() }, 'Stop');
  const inThread = () => new Set([...messages.querySelectorAll('.tool[data-action]')].map((e) => e.dataset.action));
  const pending = pendingPanel(() => prune());
  // Held actions already shown in the thread are not listed twice.
  const prune = () => {
    const shown = inThread();
    for (const card of pending.el.querySelectorAll('.tool[data-action]')) {
      if (shown.has(card.dataset.action)) card.remove();
    }
    if (!pending.el.querySelector('.tool')) pending.el.hidden = true;
  };
  const loadPending = () => pending.load().then(prune);
  const scroll = () => { messages.scrollTop = messages.scrollHeight; };

  function entry(c) {
    return h('div', { class: 'conversation', 'data-id': c.conversation_id, 'aria-current': c.conversation_id === current ? 'true' : null },
      h('a', { href: `#/chat/${encodeURIComponent(c.conversation_id)}` },
        auto('span', { class: 'title' }, c.title),
        h('small', { class: 'muted' }, `${when(c.updated_at)} · ${plural(c.message_count, 'message')}`)),
      h('button', {
        type: 'button', class: 'icon delete', 'aria-label': `Delete conversation ${c.title}`, title: 'Delete', onclick: () => remove(c),
      }, '×'));
  }

  async function loadList() {
    if (search.value.trim()) return;
    try {
      const page = await api.op('list_conversations', { page_size: 50 }, { method: 'GET', signal: stop.signal });
      fill(list, page.conversations.length ? page.conversations.map(entry)
        : h('p', { class: 'empty' }, 'No conversations yet.'));
      const shown = page.conversations.find((c) => c.conversation_id === current);
      if (shown) title.textContent = shown.title;
    } catch (e) {
      if (e.name !== 'AbortError') fill(list, notice('error', e.message));
    }
  }

  let searchTimer = 0;
  async function find() {
    const q = search.value.trim();
    if (!q) return loadList();
    try {
      const r = await api.op('search_conversations', { query: q, page_size: 20 }, { method: 'GET', signal: stop.signal });
      if (search.value.trim() !== q) return undefined;
      // One entry per conversation, each matching message a link to it.
      const groups = new Map();
      for (const hit of r.results) {
        if (!groups.has(hit.conversation_id)) groups.set(hit.conversation_id, { title: hit.title, hits: [] });
        groups.get(hit.conversation_id).hits.push(hit);
      }
      const link = (hit) => `#/chat/${encodeURIComponent(hit.conversation_id)}${hit.message_id ? `/${encodeURIComponent(hit.message_id)}` : ''}`;
      fill(list, h('p', { class: 'muted', id: 'search-count' },
        `${plural(r.total, 'match', 'matches')} in ${plural(groups.size, 'conversation')} for “${q}”`),
      [...groups].map(([id, g]) => h('div', { class: 'conversation hit', 'data-id': id, 'aria-current': id === current ? 'true' : null },
        h('div', { class: 'hits' },
          h('a', { href: link(g.hits[0]), 'data-message': g.hits[0].message_id },
            auto('span', { class: 'title' }, g.title),
            // A title hit says nothing more than the title.
            g.hits[0].snippet === g.title ? null : snippet(g.hits[0].snippet_html)),
          g.hits.slice(1).map((hit) => h('a', { class: 'more', href: link(hit), 'data-message': hit.message_id }, snippet(hit.snippet_html)))))));
    } catch (e) {
      if (e.name !== 'AbortError') fill(list, notice('error', e.message));
    }
    return undefined;
  }
  search.addEventListener('input', () => {
    lastQuery = search.value;
    clearTimeout(searchTimer);
    searchTimer = setTimeout(find, 250);
  });

  async function remove(c) {
    const ok = await confirmDanger('Delete this conversation?',
      `“${c.title}” will be removed from your list; it is deleted for good after 30 days.`);
    if (!ok) return;
    try {
      await api.op('delete_conversation', { conversation_id: c.conversation_id });
      if (c.conversation_id === current) window.location.hash = '#/chat';
      else loadList();
    } catch (e) {
      list.prepend(notice('error', e.message));
    }
  }

  async function loadThread() {
    if (!current) {
      fill(messages, h('p', { class: 'empty' }, 'Ask anything about your documents, or run a tool. Replies can take a while on a CPU; you can stop them.'));
      return;
    }
    fill(messages, h('p', { class: 'muted' }, 'Loading…'));
    try {
      const [hist, actions] = await Promise.all([
        api.op('get_conversation_history', { conversation_id: current, limit: 200 }, { method: 'GET', signal: stop.signal }),
        pending.load(),
      ]);
      const waiting = new Set(actions.map((a) => a.action_id));
      title.textContent = hist.title;
      fill(messages);
      for (const m of hist.messages.filter((x) => x.role === 'user' || x.role === 'assistant')) {
        const b = bubble(m.role, m.content, m.message_id);
        for (const call of m.tool_calls || []) {
          const held = call.status === 'pending_confirmation';
          const state = held && !waiting.has(call.action_id) ? { status: 'closed', action_id: null } : {};
          const card = toolCard({ ...call, ...state }, { onDecided: () => { loadPending(); renderReply(b); } });
          b.state.calls.push(card.call);
          b.tools.append(card.el);
        }
        if (m.role === 'assistant') {
          Object.assign(b.state, {
            done: true, sources: m.sources || [], answer_mode: m.answer_mode, grounding: m.grounding,
          });
          renderReply(b);
        }
        messages.append(b.el);
      }
      prune();
      // A search hit opens at its message, marked until the next click.
      const found = messageId && messages.querySelector(`.message[data-message="${CSS.escape(messageId)}"]`);
      if (found) {
        found.classList.add('found');
        found.scrollIntoView({ block: 'center' });
        document.addEventListener('pointerdown', () => found.classList.remove('found'), { once: true });
      } else {
        scroll();
      }
    } catch (e) {
      if (e.name === 'AbortError') return;
      fill(messages, notice('error', e.status === 404 ? 'This conversation does not exist (or was deleted).' : e.message));
    }
  }

  async function send(text) {
    controller = new AbortController();
    sendButton.disabled = true;
    stopButton.hidden = false;
    let stopTicker = ticker(status, ctx.config.llm_available ? 'Thinking' : 'Finding passages');
    if (!messages.querySelector('.message')) fill(messages);
    messages.append(bubble('user', text).el);
    const reply = bubble('assistant', '');
    reply.el.setAttribute('aria-busy', 'true');
    reply.body.classList.add('streaming');
    messages.append(reply.el);
    scroll();
    const cards = [];
    const decided = () => { loadPending(); if (reply.state.done) renderReply(reply); };
    let done = null;
    // A new conversation is stored before the reply is written: list it at once.
    const listed = current ? 0 : setTimeout(loadList, 1500);
    try {
      const params = { prompt: text, ...(current ? { conversation_id: current } : {}) };
      for await (const { event, data } of await api.stream(STREAM_URL, params, controller.signal)) {
        if (event === 'content') {
          reply.body.append(data.delta);
          // A knowledge-base answer's quotes come first; the model may still add to them.
          if (data.origin === 'extractive' && !reply.body.dataset.quoted) {
            reply.body.dataset.quoted = 'true';
            stopTicker();
            stopTicker = ticker(status, 'Quoted from your documents; the model may add to it');
          }
        } else if (event === 'tool_start') {
          const card = toolCard({ tool_name: data.tool_name, params: data.params, status: 'running' }, { onDecided: decided });
          cards.push(card);
          reply.tools.append(card.el);
        } else if (event === 'tool_result') {
          const rec = {
            tool_name: data.tool_name, status: data.status, result: data.result, error: data.error,
            execution_time_ms: data.execution_time_ms, action_id: data.action_id,
          };
          const card = cards.findLast((c) => c.el.dataset.tool === data.tool_name && c.el.dataset.status === 'running');
          if (card) card.update(rec);
          else {
            const added = toolCard(rec, { onDecided: decided });
            cards.push(added);
            reply.tools.append(added.el);
          }
        } else if (event === 'error') {
          throw new api.ApiError(data.detail, data.status_code);
        } else if (event === 'done') {
          done = data;
        }
        scroll();
      }
      if (done) {
        Object.assign(reply.state, {
          done: true,
          text: done.response || reply.body.textContent,
          sources: done.sources || [],
          answer_mode: done.answer_mode,
          grounding: done.grounding,
          calls: cards.map((c) => c.call),
        });
        if (done.message_id) reply.el.dataset.message = done.message_id;
        renderReply(reply);
        if (!current) {
          current = done.conversation_id;
          window.history.replaceState(null, '', `#/chat/${encodeURIComponent(current)}`);
        }
      }
    } catch (e) {
      reply.el.append(e.name === 'AbortError' ? notice('info', 'Stopped.') : notice('error', e.message));
    } finally {
      clearTimeout(listed);
      stopTicker();
      status.textContent = '';
      reply.body.classList.remove('streaming');
      reply.el.removeAttribute('aria-busy');
      controller = null;
      sendButton.disabled = false;
      stopButton.hidden = true;
      scroll();
      loadList();
    }
  }

  const composer = h('form', {
    class: 'composer',
    id: 'composer',
    onsubmit: (e) => {
      e.preventDefault();
      const text = input.value.trim();
      if (controller) return;
      const why = guard.problem(text);
      fill(problem, why ? notice('error', why) : null);
      if (why) return;
      input.value = '';
      guard.update();
      send(text);
    },
  }, input, problem, h('div', { class: 'row' }, sendButton, stopButton, status,
    h('span', { class: 'push' }, guard.el, h('small', { class: 'muted' }, 'Enter to send · Shift+Enter for a new line'))));
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      composer.requestSubmit();
    }
  });

  const toolsButton = h('button', {
    type: 'button',
    id: 'tools-button',
    onclick: async () => {
      try {
        const call = await runToolDialog();
        if (!call) return;
        if (!messages.querySelector('.message, .tool')) fill(messages);
        const card = toolCard(call, { onDecided: loadPending });
        card.el.classList.add('direct');
        messages.append(h('div', { class: 'direct-note muted' }, 'You ran a tool directly:'), card.el);
        scroll();
      } catch (e) {
        messages.append(notice('error', e.message));
      }
    },
  }, 'Run a tool…');

  root.append(h('div', { class: 'chat' },
    h('aside', { class: 'panel side' },
      h('a', { class: 'button primary block', href: '#/chat', id: 'new-chat' }, 'New chat'),
      search, list),
    h('section', { class: 'panel thread' },
      h('div', { class: 'panel-head' }, title, toolsButton),
      pending.el, messages, composer)));
  if (lastQuery.trim()) find();
  else loadList();
  loadThread();
  if (!messageId) input.focus();
  return () => { controller?.abort(); stop.abort(); clearTimeout(searchTimer); };
}
