// Documents: drag-and-drop upload (files and ZIPs, per-file progress, big files as
// background tasks), web pages to add, background tasks, and the list of sources with
// their passage counts, a filter and delete.

import { h, fill, append, auto, bytes, plural, notice, confirmDanger, when } from './dom.js';
import * as api from './api.js';

/** Files above this size are ingested as background tasks (their progress is polled). */
const ASYNC_ABOVE = 2 * 1024 * 1024;
/** Files uploaded at once (the server parses two at a time). */
const PARALLEL = 2;
const ACCEPT = '.txt,.md,.markdown,.rst,.pdf,.docx,.pptx,.html,.htm,.json,.csv,.xlsx,'
  + '.png,.jpg,.jpeg,.tiff,.tif,.bmp,.zip';
const TASK_POLL_MS = 1000;

/** The server's message as a sentence: capitalised, with a full stop. */
function sentence(text) {
  if (!text) return '';
  const t = text.trim();
  return `${t[0].toUpperCase()}${t.slice(1)}${/[.!?]$/.test(t) ? '' : '.'}`;
}

/** One ingestion result as a sentence, with its kind (ok, update, duplicate, error). */
export function describe(r) {
  if (!r.success) return ['error', r.error || 'not ingested'];
  if (r.is_duplicate && r.duplicate_type === 'filepath') {
    return ['update', sentence(r.duplicate_message)
      || `Updated the stored version: ${r.chunks_added} new, ${r.chunks_updated} changed, ${r.chunks_skipped} unchanged passages.`];
  }
  if (r.is_duplicate) {
    return ['duplicate', sentence(r.duplicate_message)
      || `Already stored as “${r.existing_doc_title || r.existing_doc_id}”; nothing was added.`];
  }
  return ['ok', `Added ${plural(r.chunks_added, 'passage')}${r.title ? ` — “${r.title}”` : ''}.`];
}

function row(name, size) {
  const bar = h('progress', { max: 1, value: 0, 'aria-label': `Progress of ${name}` });
  const status = h('span', { class: 'status' }, 'Waiting…');
  const detail = h('div', { class: 'detail' });
  const li = h('li', { class: 'upload', 'data-name': name },
    h('div', { class: 'line' }, auto('strong', { class: 'name' }, name),
      size == null ? null : h('span', { class: 'muted' }, bytes(size)), status),
    bar, detail);
  return {
    li,
    sending(f) { bar.value = f; status.textContent = f < 1 ? `Uploading ${Math.round(f * 100)}%` : 'Processing…'; },
    working(text, f) {
      if (f == null) bar.removeAttribute('value'); else bar.value = f;
      status.textContent = text;
    },
    done(kind, text, extra) {
      bar.value = 1;
      bar.hidden = true;
      li.dataset.state = kind;
      status.textContent = { ok: 'Added', update: 'Updated', duplicate: 'Duplicate', error: 'Failed' }[kind] || kind;
      status.className = `status ${kind}`;
      fill(detail, auto('span', {}, text), extra || null);
    },
  };
}

/** Follows a background task until it ends; resolves with it. */
async function follow(taskId, r) {
  for (;;) {
    const t = await api.kb('GET', `/tasks/${encodeURIComponent(taskId)}`);
    if (['completed', 'failed', 'cancelled'].includes(t.status)) return t;
    r.working(t.status === 'pending' ? 'Queued in the background…'
      : `In the background: ${Math.round((t.progress || 0) * 100)}%`, t.progress || null);
    await new Promise((ok) => { setTimeout(ok, TASK_POLL_MS); });
  }
}

function bulkDetails(res) {
  return h('ul', { class: 'sub' }, (res.results || []).map((item) => {
    const [kind, text] = describe(item);
    return h('li', { 'data-state': kind }, auto('strong', {}, item.filename || item.url || ''), ' — ', auto('span', {}, text));
  }));
}

// Uploads outlive the view: leaving Documents and coming back shows them still going.
const uploads = h('ul', { class: 'uploads', id: 'uploads', 'aria-live': 'polite' });
const queue = [];
let running = 0;
let onIngested = () => {};

function pump() {
  while (running < PARALLEL && queue.length) {
    const { file, section, r } = queue.shift();
    running += 1;
    ingest(file, section, r).finally(() => {
      running -= 1;
      onIngested();
      pump();
    });
  }
}

async function ingest(file, section, r) {
  const form = new FormData();
  form.append('file', file);
  form.append('section', section || 'uploaded');
  const zip = /\.zip$/i.test(file.name);
  const background = !zip && file.size > ASYNC_ABOVE;
  const path = zip ? '/upload/bulk/zip' : background ? '/upload/async' : '/upload';
  try {
    const res = await api.upload(path, form, (f) => r.sending(f));
    if (zip) {
      const kind = res.failed ? (res.successful ? 'update' : 'error') : 'ok';
      r.done(kind, `${plural(res.total_files, 'file')}: ${res.successful} ingested, ${res.duplicates} duplicates, `
        + `${res.failed} failed, ${plural(res.total_chunks_added, 'passage')} added.`, bulkDetails(res));
    } else if (background) {
      const t = await follow(res.task_id, r);
      if (t.status === 'completed' && t.result) r.done(...describe(t.result));
      else r.done('error', t.error || `The background task was ${t.status}.`);
    } else {
      r.done(...describe(res));
    }
  } catch (e) {
    r.done('error', e.message);
  }
}

function dropZone(onFiles) {
  const input = h('input', {
    type: 'file', id: 'file-input', multiple: true, accept: ACCEPT, class: 'visually-hidden',
    onchange: () => { onFiles([...input.files]); input.value = ''; },
  });
  const zone = h('label', {
    for: 'file-input',
    class: 'drop',
    id: 'drop-zone',
    tabindex: 0,
    role: 'button',
    'aria-describedby': 'drop-help',
    onkeydown: (e) => {
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); input.click(); }
    },
    ondragover: (e) => { e.preventDefault(); zone.classList.add('over'); },
    ondragleave: () => zone.classList.remove('over'),
    ondrop: (e) => {
      e.preventDefault();
      zone.classList.remove('over');
      onFiles([...e.dataTransfer.files]);
    },
  },
  h('strong', {}, 'Drop files here'), h('span', {}, ' or '), h('span', { class: 'like-button' }, 'choose files'),
  h('small', { id: 'drop-help' }, 'PDF, Word, PowerPoint, Excel, HTML, Markdown, text, CSV, JSON, images (OCR) and ZIP archives of them.'));
  return [input, zone];
}

export function documentsView(root, ctx) {
  const stop = new AbortController();
  const section = h('input', { id: 'section', value: 'uploaded', maxlength: 200, size: 14 });
  const sources = h('div', { id: 'sources' }, h('p', { class: 'muted' }, 'Loading…'));
  const filter = h('input', { type: 'search', id: 'source-filter', placeholder: 'Filter sources', 'aria-label': 'Filter sources' });
  const tasks = h('div', { id: 'tasks' });
  let stats = { by_source: {}, by_language: {}, total_documents: 0 };

  async function refresh() {
    try {
      stats = await api.kb('GET', '/documents/stats', undefined, { signal: stop.signal });
      renderSources();
    } catch (e) {
      if (e.name !== 'AbortError') fill(sources, notice('error', `Could not list the sources: ${e.message}`));
    }
  }

  function add(files) {
    for (const file of files) {
      const r = row(file.name, file.size);
      uploads.prepend(r.li);
      if (file.size > ctx.boot.max_upload_bytes) {
        r.done('error', `Larger than this server accepts (${bytes(ctx.boot.max_upload_bytes)}).`);
      } else {
        queue.push({ file, section: section.value.trim(), r });
      }
    }
    pump();
  }

  async function remove(source, count) {
    const ok = await confirmDanger('Delete this source?',
      `All ${plural(count, 'passage')} of “${source}” will be removed from the knowledge base. This cannot be undone.`);
    if (!ok) return;
    try {
      await api.kb('POST', '/documents/delete/by-source', { source });
      await refresh();
    } catch (e) {
      sources.prepend(notice('error', `Could not delete “${source}”: ${e.message}`));
    }
  }

  function renderSources() {
    const entries = Object.entries(stats.by_source || {}).sort((a, b) => a[0].localeCompare(b[0]));
    const q = filter.value.trim().toLowerCase();
    const shown = entries.filter(([s]) => !q || s.toLowerCase().includes(q));
    const langs = Object.entries(stats.by_language || {}).sort((a, b) => b[1] - a[1])
      .map(([l, n]) => `${l} ${n}`).join(', ');
    if (!entries.length) {
      fill(sources, h('p', { class: 'empty' }, 'Nothing here yet. Drop a file above to start.'));
      return;
    }
    // The summary counts what the filter shows.
    const passages = shown.reduce((n, [, c]) => n + c, 0);
    fill(sources,
      h('p', { class: 'muted', id: 'source-summary' }, q
        ? `${shown.length} of ${plural(entries.length, 'source')} · ${passages} of ${plural(stats.total_documents, 'passage')}`
        : [`${plural(entries.length, 'source')} · ${plural(stats.total_documents, 'passage')}`, langs ? ` · languages: ${langs}` : '']),
      shown.length ? h('table', { class: 'list' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Source'), h('th', { class: 'num' }, 'Passages'), h('th', {}, h('span', { class: 'visually-hidden' }, 'Actions')))),
        h('tbody', {}, shown.map(([s, n]) => h('tr', { 'data-source': s },
          auto('td', { class: 'source' }, s),
          h('td', { class: 'num' }, String(n)),
          h('td', { class: 'actions' }, h('button', {
            type: 'button', class: 'danger small', 'aria-label': `Delete ${s}`, onclick: () => remove(s, n),
          }, 'Delete'))))))
        : h('p', { class: 'empty' }, `No source matches “${filter.value}”.`));
  }

  const urls = h('textarea', { id: 'urls', rows: 2, placeholder: 'One web address per line', 'aria-label': 'Web addresses' });
  const scrapeButton = h('button', { type: 'submit' }, 'Add pages');
  async function scrape(e) {
    e.preventDefault();
    const list = urls.value.split(/\s+/).map((u) => u.trim()).filter(Boolean);
    if (!list.length) return;
    scrapeButton.disabled = true;
    try {
      if (list.length === 1) {
        const r = row(list[0]);
        uploads.prepend(r.li);
        r.working('Fetching…');
        try {
          r.done(...describe(await api.kb('POST', '/scrape', { url: list[0] })));
        } catch (err) {
          r.done('error', err.message);
        }
      } else {
        const r = row(`${plural(list.length, 'web page')}`);
        uploads.prepend(r.li);
        try {
          const ack = await api.kb('POST', '/scrape/async', { urls: list });
          const t = await follow(ack.task_id, r);
          const res = t.result || {};
          r.done(t.status === 'completed' && !res.failed ? 'ok' : 'error',
            t.status === 'completed'
              ? `${res.successful} of ${res.urls_processed} pages added, ${plural(res.total_chunks_added || 0, 'passage')}.`
              : t.error || `The task was ${t.status}.`, bulkDetails(res));
        } catch (err) {
          r.done('error', err.message);
        }
      }
      urls.value = '';
      refresh();
    } finally {
      scrapeButton.disabled = false;
    }
  }

  async function loadTasks() {
    try {
      const { tasks: list } = await api.kb('GET', '/tasks?limit=8', undefined, { signal: stop.signal });
      const active = list.filter((t) => t.status === 'pending' || t.status === 'running');
      fill(tasks, list.length ? h('details', { class: 'panel tasks', open: active.length > 0 },
        h('summary', {}, `Background tasks${active.length ? ` (${active.length} running)` : ''}`),
        h('ul', {}, list.map((t) => h('li', {},
          h('span', { class: `badge ${t.status}` }, t.status),
          ` ${t.result?.filename || t.result?.title || t.task_id.slice(0, 8)} · ${when(t.created_at)}`,
          t.status === 'running' ? ` · ${Math.round((t.progress || 0) * 100)}%` : '',
          t.error ? auto('span', { class: 'muted' }, ` · ${t.error}`) : '',
          active.includes(t) ? h('button', {
            type: 'button', class: 'small', onclick: async () => { await api.kb('DELETE', `/tasks/${t.task_id}`).catch(() => {}); loadTasks(); },
          }, 'Cancel') : null)))) : null);
    } catch {
      // The list of tasks is a convenience; the uploads report their own outcome.
    }
  }

  const [input, zone] = dropZone(add);
  filter.addEventListener('input', renderSources);
  const banner = ctx.user.is_admin && ctx.config.onboarding_completed === false
    ? h('div', { class: 'banner', id: 'setup-banner' },
      h('div', {}, h('strong', {}, 'Welcome. '), 'Answer a few questions to set up this installation: name, language, tone, modules and the web pages to add.'),
      h('a', { class: 'button primary', href: '#/setup' }, 'Set up'))
    : null;
  append(root, [
    banner,
    h('div', { class: 'grid two' },
      h('section', { class: 'panel', 'aria-labelledby': 'upload-title' },
        h('h2', { id: 'upload-title' }, 'Add documents'),
        input, zone,
        h('div', { class: 'row' }, h('label', { for: 'section' }, 'Section label'), section),
        uploads),
      h('section', { class: 'panel', 'aria-labelledby': 'scrape-title' },
        h('h2', { id: 'scrape-title' }, 'Add web pages'),
        h('form', { class: 'stack', onsubmit: scrape }, urls, h('div', {}, scrapeButton)),
        h('p', { class: 'hint' }, 'The server fetches each page (http or https, following redirects) and stores its text. '
          + 'Several addresses at once become one background task.'),
        tasks)),
    h('section', { class: 'panel', 'aria-labelledby': 'sources-title' },
      h('div', { class: 'panel-head' }, h('h2', { id: 'sources-title' }, 'Sources'), filter),
      sources)]);
  onIngested = refresh;
  refresh();
  loadTasks();
  const poll = setInterval(loadTasks, 5000);
  return () => { onIngested = () => {}; clearInterval(poll); stop.abort(); };
}
