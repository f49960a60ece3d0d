// Chat: the caller's conversations (new, delete, full-text search over the history), a
// thread with replies streamed from stream_ai_response, tool calls shown as they happen,
// held high-risk actions with Confirm / Reject, and a dialog to run a tool directly.

import { h, fill, auto, notice, confirmDanger, ticker, when, plural } from './dom.js';
import * as api from './api.js';
import { withCitations, sourceList, modeTitle, refused } from './ask.js';
import { toolCard, pendingPanel, runToolDialog } from './actions.js';

const STREAM_URL = '/api/method/assistant.api.stream_ai_response';

/** A search snippet: the server's escaped excerpt, keeping only its <b> highlights. */
function snippet(html) {
  const t = document.createElement('template');
  t.innerHTML = html;
  return auto('span', { class: 'snippet' }, [...t.content.childNodes].map((n) => (
    n.nodeName === 'B' ? h('mark', {}, n.textContent) : n.textContent)));
}

function bubble(role, text) {
  const body = auto('div', { class: 'text' }, text);
  const tools = h('div', { class: 'tools' });
  const el = h('article', { class: `message ${role}`, 'data-role': role },
    h('div', { class: 'who' }, role === 'user' ? 'You' : 'Assistant'), body, tools);
  return { el, body, tools };
}

export function chatView(root, ctx, [conversationId]) {
  let current = conversationId || null;
  let controller = null;
  const stop = new AbortController();
  const list = h('nav', { class: 'conversation-list', id: 'conversation-list', 'aria-label': 'Conversations' });
  const search = h('input', { type: 'search', id: 'history-search', placeholder: 'Search all conversations', 'aria-label': 'Search all conversations' });
  const title = auto('h2', { id: 'thread-title' }, 'New conversation');
  const messages = h('div', { class: 'messages', id: 'messages', 'aria-live': 'polite' });
  const status = h('span', { class: 'muted', id: 'chat-status' });
  const input = auto('textarea', { id: 'chat-input', rows: 2, maxlength: 8000, placeholder: 'Write a message', 'aria-label': 'Message' });
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
      fill(list, h('p', { class: 'muted', id: 'search-count' }, `${plural(r.total, 'match', 'matches')} for “${q}”`),
        r.results.map((hit) => h('div', { class: 'conversation hit', 'data-id': hit.conversation_id },
          h('a', { href: `#/chat/${encodeURIComponent(hit.conversation_id)}` },
            auto('span', { class: 'title' }, hit.title), snippet(hit.snippet_html)))));
    } catch (e) {
      if (e.name !== 'AbortError') fill(list, notice('error', e.message));
    }
    return undefined;
  }
  search.addEventListener('input', () => { clearTimeout(searchTimer); searchTimer = setTimeout(find, 250); });

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
        const b = bubble(m.role, m.content);
        for (const call of m.tool_calls || []) {
          const held = call.status === 'pending_confirmation';
          const state = held && !waiting.has(call.action_id) ? { status: 'closed', action_id: null } : {};
          b.tools.append(toolCard({ ...call, ...state }, { onDecided: loadPending }).el);
        }
        messages.append(b.el);
      }
      prune();
      scroll();
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
          const card = toolCard({ tool_name: data.tool_name, params: data.params, status: 'running' }, { onDecided: loadPending });
          cards.push(card);
          reply.tools.append(card.el);
        } else if (event === 'tool_result') {
          const rec = {
            tool_name: data.tool_name, status: data.status, result: data.result, error: data.error,
            execution_time_ms: data.execution_time_ms, action_id: data.action_id,
          };
          const card = cards.findLast((c) => c.el.dataset.tool === data.tool_name && c.el.dataset.status === 'running');
          if (card) card.update(rec);
          else reply.tools.append(toolCard(rec, { onDecided: loadPending }).el);
        } else if (event === 'error') {
          throw new api.ApiError(data.detail, data.status_code);
        } else if (event === 'done') {
          done = data;
        }
        scroll();
      }
      if (done) {
        const sources = done.sources || [];
        fill(reply.body, withCitations(done.response || reply.body.textContent, sources));
        // A knowledge-base answer says where its sentences come from.
        if (done.grounding) {
          const mode = modeTitle(done);
          reply.el.querySelector('.who').append(' ', h('span', { class: 'chip', title: mode, 'aria-label': `${done.answer_mode}: ${mode}` }, done.answer_mode));
        }
        if (sources.length) {
          const label = refused(done) ? `Closest passages (${sources.length})` : plural(sources.length, 'source');
          reply.body.after(h('details', { class: 'reply-sources' }, h('summary', {}, label), sourceList(sources)));
        }
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
      if (!text || controller) return;
      input.value = '';
      send(text);
    },
  }, input, h('div', { class: 'row' }, sendButton, stopButton, status,
    h('small', { class: 'muted push' }, 'Enter to send · Shift+Enter for a new line')));
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
  loadList();
  loadThread();
  input.focus();
  return () => { controller?.abort(); stop.abort(); clearTimeout(searchTimer); };
}
