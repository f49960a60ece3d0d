// The two APIs as the page calls them. The knowledge-base API (/api/v1) is reached with
// the signed-in session: every call carries X-Requested-With: ragd-web and the session
// cookie, never an API key. The assistant API (/api/method) uses the same cookie.

const WEB = { 'X-Requested-With': 'ragd-web' };
const JSON_BODY = { ...WEB, 'Content-Type': 'application/json' };

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

let signedOut = () => {};

/** Called when the server says the session is over (401). */
export function onSignedOut(fn) {
  signedOut = fn;
}

function detailOf(body) {
  return body?.detail || body?.message?.error?.detail || null;
}

async function failure(res, { quiet = false } = {}) {
  let detail = null;
  try {
    detail = detailOf(await res.json());
  } catch {
    // Not JSON: the status line says enough.
  }
  if (res.status === 401 && !quiet) signedOut();
  return new ApiError(detail || `the server answered ${res.status}`, res.status);
}

function offline(e) {
  if (e.name === 'AbortError') throw e;
  throw new ApiError('the server could not be reached', 0);
}

/** A knowledge-base call: JSON in, JSON out. */
export async function kb(method, path, body, { signal } = {}) {
  const init = { method, headers: body === undefined ? WEB : JSON_BODY, signal };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(`/api/v1${path}`, init).catch(offline);
  if (!res.ok) throw await failure(res);
  return res.json();
}

function methodPath(name) {
  return name === 'login' || name === 'logout' ? name : `assistant.api.${name}`;
}

/** An assistant operation; resolves with `message.data`. */
export async function op(name, params = {}, { method = 'POST', signal, quiet = false } = {}) {
  let url = `/api/method/${methodPath(name)}`;
  const init = { method, headers: WEB, signal };
  if (method === 'GET') {
    const q = new URLSearchParams(params).toString();
    if (q) url += `?${q}`;
  } else {
    init.headers = JSON_BODY;
    init.body = JSON.stringify(params);
  }
  const res = await fetch(url, init).catch(offline);
  if (!res.ok) throw await failure(res, { quiet });
  return (await res.json()).message.data;
}

/** Server-sent events of a response, as {event, data} objects. */
export async function* events(res) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let end;
    while ((end = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end).replace(/^\r?\n\r?\n/, '');
      let event = 'message';
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      // Keep-alive comments carry no data.
      if (data.length) yield { event, data: JSON.parse(data.join('\n')) };
    }
  }
}

/** POSTs JSON and returns the stream of events it answers with. */
export async function stream(url, body, signal) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...JSON_BODY, Accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal,
  }).catch(offline);
  if (!res.ok) throw await failure(res);
  return events(res);
}

/** Uploads a form to the knowledge base, reporting the fraction sent. */
export function upload(path, form, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open('POST', `/api/v1${path}`);
    x.setRequestHeader(...Object.entries(WEB)[0]);
    x.responseType = 'json';
    x.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    };
    x.upload.onload = () => onProgress(1);
    x.onload = () => {
      if (x.status >= 200 && x.status < 300) return resolve(x.response);
      if (x.status === 401) signedOut();
      const detail = detailOf(x.response) || (x.status === 413 ? 'the file is too large' : null);
      return reject(new ApiError(detail || `the server answered ${x.status}`, x.status));
    };
    x.onerror = () => reject(new ApiError('the upload was interrupted', 0));
    x.send(form);
  });
}
