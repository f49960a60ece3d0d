// Ask: one question over /api/v1/query, the answer streamed as it is written (the
// sentences quoted from the sources first, at once, then the model's checked sentences),
// numbered citations that open the cited passage (source, section, page), and the timing.
// An empty or over-long question is refused with a message, never sent cut.

import {
  h, fill, auto, notice, modal, seconds, ticker, plural, lengthGuard,
} from './dom.js';
import * as api from './api.js';

const PAGED = { pdf: 'Page', pptx: 'Slide' };
/** Longest question the page sends. */
const MAX_QUESTION_CHARS = 4000;

function pagesOf(m) {
  const kind = PAGED[String(m.file_type || '').replace(/^\./, '').toLowerCase()];
  if (!kind || !m.page_start) return null;
  return m.page_end && m.page_end !== m.page_start
    ? [`${kind}s`, `${m.page_start}–${m.page_end}`]
    : [kind, String(m.page_start)];
}

/** Shows the passage a citation points to. */
export async function openPassage(source, n) {
  const body = h('div', { class: 'passage', id: 'passage' }, h('p', { class: 'muted' }, 'Loading the passage…'));
  const shown = modal({
    title: `Source ${n}`,
    body,
    wide: true,
    actions: [{ label: 'Close', value: 'close', class: 'primary' }],
  });
  try {
    const doc = await api.kb('GET', `/documents/${encodeURIComponent(source.doc_id)}`);
    const m = doc.metadata || {};
    const pages = pagesOf(m);
    const item = (k, v) => (v ? [h('dt', {}, k), auto('dd', {}, v)] : null);
    fill(body,
      auto('h3', { class: 'passage-title' }, m.title || source.title || source.source),
      h('dl', { class: 'meta' },
        item('Source', m.source || source.source),
        item('Section', m.section_path || m.heading || null),
        pages ? item(...pages) : null,
        item('Label', m.section),
        item('Passage', m.total_chunks ? `${(m.chunk_index ?? 0) + 1} of ${m.total_chunks}` : null),
        item('Language', m.language)),
      auto('blockquote', { class: 'passage-text', id: 'passage-text' }, doc.text));
  } catch (e) {
    fill(body, notice('error', e.status === 404
      ? 'This passage is no longer stored (its source was deleted or updated).'
      : `Could not load the passage: ${e.message}`));
  }
  return shown;
}

/** The button of citation `n` that opens its source, or null when there is no source n. */
export function citeButton(sources, n) {
  const s = sources?.[n - 1];
  if (!s) return null;
  return h('button', {
    type: 'button',
    class: 'cite',
    'data-n': n,
    title: s.title || s.source,
    'aria-label': `Source ${n}: ${s.title || s.source}`,
    onclick: () => openPassage(s, n),
  }, String(n));
}

/** Answer text with each [n] turned into a button that opens source n. */
export function withCitations(text, sources) {
  const parts = [];
  let last = 0;
  for (const m of text.matchAll(/\[(\d{1,2})\]/g)) {
    const button = citeButton(sources, Number(m[1]));
    if (!button) continue;
    parts.push(text.slice(last, m.index));
    parts.push(button);
    last = m.index + m[0].length;
  }
  parts.push(text.slice(last));
  return parts;
}

/** The numbered list of sources under an answer. */
export function sourceList(sources) {
  if (!sources?.length) return null;
  return h('ol', { class: 'sources' }, sources.map((s, i) => h('li', {},
    h('button', { type: 'button', class: 'link', 'data-n': i + 1, onclick: () => openPassage(s, i + 1) },
      auto('span', {}, s.title || s.source)),
    auto('span', { class: 'muted' }, ` ${s.source}${s.section ? ` · ${s.section}` : ''}`),
    h('span', { class: 'score', title: 'How relevant the passage is to the question: 50% means as likely relevant as not' },
      `relevance ${Math.round(s.score * 100)}%`))));
}

/** Whether an answer says that the documents do not hold it: its passages are then only
 * the closest ones, not sources. */
export function refused(r) {
  return r.grounding?.outcome === 'not_in_sources';
}

function timingLine(t) {
  return `Answered in ${seconds(t.total)} · finding passages ${seconds(t.retrieval_total)} `
    + `(embedding ${seconds(t.embedding)}, search ${seconds(t.vector_search)}, reranking ${seconds(t.reranking)}) `
    + `· writing ${seconds(t.llm_generation)}`;
}

/** What the answer's mode means, with the counts of `grounding`. */
export function modeTitle(r) {
  const g = r.grounding || {};
  const quoted = g.extractive_sentences || 0;
  const written = g.generated_sentences || 0;
  if (r.answer_mode === 'mixed') {
    return `${plural(quoted, 'sentence')} quoted from your documents, then ${plural(written, 'sentence')} `
      + 'written by the local language model and checked against them';
  }
  if (r.answer_mode === 'generative') {
    return `${plural(written, 'sentence')} written by the local language model from your documents, each checked against them`;
  }
  if (g.outcome === 'not_in_sources') return 'Your documents do not hold the answer';
  return `${plural(quoted, 'sentence')} quoted from your documents`
    + (g.sentences?.length ? ' (the language model added nothing they support)' : '');
}

function renderAnswer(box, r) {
  const mode = modeTitle(r);
  fill(box,
    h('div', { class: 'panel-head' }, h('h2', {}, 'Answer'),
      h('span', { class: 'chip', id: 'answer-mode', title: mode, 'aria-label': `${r.answer_mode}: ${mode}` }, r.answer_mode)),
    auto('div', { class: 'answer-text', id: 'answer-text' }, withCitations(r.answer, r.sources)),
    r.sources.length ? h('h3', { id: 'sources-heading' }, refused(r) ? 'Closest passages' : 'Sources') : null,
    sourceList(r.sources),
    r.timing ? h('p', { class: 'timing muted', id: 'timing' }, timingLine(r.timing)) : null);
}

export function askView(root) {
  let controller = null;
  const question = auto('textarea', {
    id: 'question', rows: 3, placeholder: 'Ask a question about your documents', 'aria-label': 'Question',
  });
  const guard = lengthGuard(question, MAX_QUESTION_CHARS, 'question');
  const problem = h('div', { id: 'ask-problem' });
  question.addEventListener('input', () => fill(problem));
  const askButton = h('button', { type: 'submit', class: 'primary', id: 'ask-button' }, 'Ask');
  const stopButton = h('button', { type: 'button', id: 'stop-button', hidden: true, onclick: () => controller?.abort() }, 'Stop');
  const status = h('span', { class: 'muted', id: 'ask-status', 'aria-live': 'polite' });
  const answer = h('section', { class: 'panel answer', id: 'answer', hidden: true, 'aria-live': 'polite' });

  async function ask(e) {
    e.preventDefault();
    const q = question.value.trim();
    if (controller) return;
    const why = guard.problem(q);
    fill(problem, why ? notice('error', why) : null);
    if (why) return;
    controller = new AbortController();
    askButton.disabled = true;
    stopButton.hidden = false;
    let stopTicker = ticker(status, 'Finding passages and answering');
    const text = auto('div', { class: 'answer-text streaming', id: 'answer-text' });
    fill(answer, h('h2', {}, 'Answer'), text);
    answer.hidden = false;
    answer.setAttribute('aria-busy', 'true');
    let result = null;
    try {
      const events = await api.stream('/api/v1/query', { question: q, stream: true }, controller.signal);
      for await (const { event, data } of events) {
        if (event === 'token') {
          // Quotes arrive first, at once; the model's checked sentences only ever extend them.
          text.append(h('span', { class: `piece ${data.origin || ''}` }, data.delta));
          if (!text.dataset.shown) {
            text.dataset.shown = 'true';
            stopTicker();
            stopTicker = ticker(status, data.origin === 'extractive'
              ? 'Quoted from your documents; the model may add to it' : 'Writing');
          }
        } else if (event === 'error') throw new api.ApiError(data.detail, data.status_code);
        else if (event === 'done' && data.answer !== undefined) result = data;
      }
      if (result) renderAnswer(answer, result);
      else answer.append(notice('error', 'The answer ended early.'));
    } catch (err) {
      text.classList.remove('streaming');
      answer.append(err.name === 'AbortError' ? notice('info', 'Stopped.') : notice('error', err.message));
    } finally {
      stopTicker();
      status.textContent = '';
      controller = null;
      askButton.disabled = false;
      stopButton.hidden = true;
      answer.removeAttribute('aria-busy');
    }
  }

  const form = h('form', { class: 'panel ask', id: 'ask-form', onsubmit: ask },
    h('h2', {}, 'Ask your documents'),
    question,
    problem,
    h('div', { class: 'row' }, askButton, stopButton, status,
      h('span', { class: 'push' }, guard.el, h('small', { class: 'muted' }, 'Enter to ask · Shift+Enter for a new line'))));
  question.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  root.append(form, answer);
  question.focus();
  return () => controller?.abort();
}
