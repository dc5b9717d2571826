// app.js: boot, sign-in state, the navigation and the hash router (#/session, #/admin/keys...).
import { h, mount, api, setAuth, notice } from './lib.js';
import { claims, expiresIn, readToken, storeToken, clearToken, takeHashToken, finishOIDC, signInScreen } from './auth.js';
import { landing } from './landing.js';
import * as client from './client.js';
import * as store from './store.js';
import * as admin from './admin.js';

const root = document.getElementById('app');

const clientScreens = [
  ['session', 'Session', client.session],
  ['send', 'Send', client.send],
  ['keys', 'API keys', client.keys],
  ['usage', 'Usage', client.usage],
  ['templates', 'Templates', store.templates],
  ['store', 'Store', store.store],
  ['campaigns', 'Campaigns', client.campaigns],
  ['webhooks', 'Webhooks', client.webhooks],
];
const adminScreens = [
  ['admin/users', 'Users', admin.users],
  ['admin/keys', 'Keys', admin.keys],
  ['admin/sessions', 'Sessions', admin.sessions],
];

let cfg = null;
let me = null;
let cleanup = null;
let expiryTimer = null;

// The sign-in configuration is fetched at once, but only the sign-in screen and the OIDC return
// wait for it: a page opened with a token goes straight to its first screen.
const config = fetch('/dashboard/config.json', { cache: 'no-store' }).then((r) => r.json());
config.catch(() => {}); // reported where it is awaited

async function boot() {
  const path = location.pathname.replace(/\/+$/, '');
  if (path.endsWith('/connect-store/success') || path.endsWith('/connect-store/error')) {
    landing(root, path.endsWith('/success'), new URLSearchParams(location.search), !!readToken());
    return;
  }
  const fromHash = takeHashToken();
  if (fromHash) storeToken(fromHash);
  const q = new URLSearchParams(location.search);
  if (q.has('code') || q.has('error')) {
    try {
      const t = await finishOIDC(await config);
      if (t) storeToken(t);
    } catch (e) {
      clearToken();
      return showSignIn('Sign-in failed: ' + e.message + '.');
    }
  }
  const token = readToken();
  if (!token) return showSignIn(fromHash ? 'That sign-in link has expired. Sign in again.' : '');
  start(token);
}

async function showSignIn(message) {
  stopScreen();
  clearTimeout(expiryTimer);
  setAuth(null);
  try {
    cfg = cfg || (await config);
  } catch {
    mount(root, notice('error', 'The gateway cannot be reached. Reload the page to try again.'));
    return;
  }
  signInScreen(root, cfg, message, (t) => { storeToken(t); start(t); });
}

function signOut(message) {
  clearToken();
  me = null;
  if (location.hash !== '#/') history.replaceState(null, '', location.pathname + '#/');
  showSignIn(message);
}

async function start(token) {
  const c = claims(token);
  setAuth(token, () => signOut('Your sign-in has expired or was refused. Sign in again.'));
  clearTimeout(expiryTimer);
  expiryTimer = setTimeout(() => signOut('Your sign-in has expired. Sign in again.'), Math.min(Math.max(expiresIn(token) - 2000, 0), 2 ** 31 - 1));
  // The role claim (dev tokens) is a hint for the first screen; the admin routes' answer decides,
  // in parallel, so a client's first screen does not wait for it.
  me = { uid: c.sub, name: c.name || c.email || c.sub, admin: c.role === 'admin' };
  const user = me;
  api('GET', '/api/admin/users').then(() => true, (e) => (e.status === 403 ? false : null)).then((admin) => {
    if (admin === null || me !== user || admin === me.admin) return;
    me.admin = admin;
    shell();
    route();
  });
  shell();
  if (!location.hash || location.hash === '#/' || location.hash === '#') location.hash = me.admin ? '#/admin/keys' : '#/session';
  else route();
}

let view = null;
let nav = null;

function shell() {
  const link = ([id, title]) => h('a', { href: '#/' + id, 'data-route': id }, title);
  nav = h('nav', {},
    h('div', { class: 'group' }, h('span', { class: 'label' }, 'Client'), clientScreens.map(link)),
    me.admin ? h('div', { class: 'group' }, h('span', { class: 'label' }, 'Admin'), adminScreens.map(link)) : null,
    h('div', { class: 'group' }, h('a', { href: '/docs', target: '_blank', rel: 'noopener' }, 'API reference')));
  view = h('main', { id: 'view' });
  mount(root, h('header', {},
    h('a', { class: 'brand', href: '#/' }, 'gateway'),
    h('span', { class: 'who' }, me.name, me.admin ? h('span', { class: 'badge b-admin' }, 'admin') : null),
    h('button', { type: 'button', class: 'small ghost', id: 'signout', onclick: () => signOut('You are signed out.') }, 'Sign out')),
  h('div', { class: 'layout' }, nav, view));
}

function stopScreen() {
  if (cleanup) { try { cleanup(); } catch { /* ignore */ } cleanup = null; }
}

function route() {
  if (!me || !view) return;
  const id = location.hash.replace(/^#\/?/, '').split('?')[0];
  const all = me.admin ? [...clientScreens, ...adminScreens] : clientScreens;
  const found = all.find(([sid]) => sid === id);
  if (!found) { location.hash = me.admin ? '#/admin/keys' : '#/session'; return; }
  stopScreen();
  for (const a of nav.querySelectorAll('a[data-route]')) a.classList.toggle('active', a.dataset.route === id);
  const [, title, screen] = found;
  document.title = title + ' · gateway';
  mount(view, h('h1', {}, title));
  const body = h('div', { class: 'screen', id: 'screen-' + id.replace('/', '-') });
  view.append(body);
  cleanup = screen(body, me) || null;
}

window.addEventListener('hashchange', () => {
  const t = takeHashToken();
  if (t) { storeToken(t); start(t); return; }
  route();
});

boot();
