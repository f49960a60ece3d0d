// The page: sign-in, the header, and the routes (#/documents, #/ask, #/chat/<id>,
// #/settings, #/setup). Each view renders into <main> and returns a function that
// stops its work (streams, polling) when the reader leaves it.

import { h, fill, $, notice } from './dom.js';
import * as api from './api.js';
import { documentsView } from './documents.js';
import { askView } from './ask.js';
import { chatView } from './chat.js';
import { setupView } from './setup.js';
import { settingsView } from './settings.js';

const boot = JSON.parse($('#boot').textContent);
const ctx = { user: boot.user, boot, config: {} };
let leave = () => {};

const VIEWS = [
  { path: 'documents', label: 'Documents', view: documentsView },
  { path: 'ask', label: 'Ask', view: askView },
  { path: 'chat', label: 'Chat', view: chatView },
  { path: 'settings', label: 'Settings', view: settingsView, admin: true },
  { path: 'setup', view: setupView, admin: true },
];

function signIn(message) {
  leave();
  leave = () => {};
  ctx.user = null;
  $('#top').hidden = true;
  const error = h('div', { class: 'signin-error' }, message ? notice('error', message) : null);
  const email = h('input', { type: 'email', id: 'email', name: 'usr', autocomplete: 'username', required: true });
  const password = h('input', { type: 'password', id: 'password', name: 'pwd', autocomplete: 'current-password', required: true });
  const button = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h('form', {
    class: 'signin panel',
    onsubmit: async (e) => {
      e.preventDefault();
      button.disabled = true;
      fill(error);
      try {
        const data = await api.op('login', { usr: email.value, pwd: password.value }, { quiet: true });
        ctx.user = { email: data.user.email, is_admin: data.user.is_admin };
        await start();
      } catch (err) {
        fill(error, notice('error', err.status === 401 ? 'Wrong email or password.' : err.message));
        button.disabled = false;
        password.select();
      }
    },
  },
  h('div', { class: 'brand big' }, h('img', { src: '/web/icon.svg', alt: '' }), 'ragd'),
  h('p', { class: 'muted' }, 'Your knowledge base and assistant, on this machine.'),
  h('label', { for: 'email' }, 'Email'), email,
  h('label', { for: 'password' }, 'Password'), password,
  error,
  button,
  h('p', { class: 'hint' }, 'First start? The administrator’s sign-in is in ',
    h('code', {}, 'initial-admin.txt'), ' in the data directory. More people are added with ',
    h('code', {}, 'ragd user add'), '.'));
  fill($('#view'), h('div', { class: 'center' }, form));
  email.focus();
}

function header() {
  const top = $('#top');
  const nav = h('nav', { 'aria-label': 'Main' },
    VIEWS.filter((v) => v.label && (!v.admin || ctx.user.is_admin))
      .map((v) => h('a', { href: `#/${v.path}`, 'data-path': v.path }, v.label)));
  const mode = ctx.config.llm_available
    ? h('span', { class: 'chip ok', title: 'Answers are written by the local language model' }, 'LLM answers')
    : h('span', { class: 'chip', title: 'No language model is installed: answers quote the best sentences of your documents' }, 'Extractive answers');
  fill(top,
    h('a', { class: 'brand', href: '#/documents' }, h('img', { src: '/web/icon.svg', alt: '' }), 'ragd',
      ctx.config.company_name ? h('span', { class: 'org', dir: 'auto' }, ctx.config.company_name) : null),
    nav,
    h('div', { class: 'who' }, mode,
      h('span', { class: 'email', title: ctx.user.is_admin ? 'Administrator' : 'User' }, ctx.user.email),
      h('button', { type: 'button', class: 'link', id: 'sign-out', onclick: signOut }, 'Sign out')));
  top.hidden = false;
}

async function signOut() {
  try {
    await api.op('logout', {}, { quiet: true });
  } finally {
    window.location.hash = '';
    signIn();
  }
}

function route() {
  if (!ctx.user) return;
  const [path, ...rest] = window.location.hash.replace(/^#\/?/, '').split('/');
  const entry = VIEWS.find((v) => v.path === path && (!v.admin || ctx.user.is_admin)) || VIEWS[0];
  for (const a of document.querySelectorAll('#top nav a')) {
    if (a.dataset.path === entry.path) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  leave();
  const root = $('#view');
  root.replaceChildren();
  root.dataset.view = entry.path;
  leave = entry.view(root, ctx, rest.map(decodeURIComponent)) || (() => {});
}

async function loadConfig() {
  try {
    ctx.config = await api.op('get_config', {}, { method: 'GET' });
  } catch (e) {
    if (e.status === 401) throw e;
    ctx.config = {};
  }
}

async function start() {
  try {
    await loadConfig();
  } catch {
    return signIn('Your session has ended. Please sign in again.');
  }
  header();
  route();
}

api.onSignedOut(() => signIn('Your session has ended. Please sign in again.'));
window.addEventListener('hashchange', route);
ctx.refreshConfig = async () => { await loadConfig(); header(); };
if (ctx.user) start();
else signIn();
