// app.js: boot, sign-in state, the shell (header, navigation drawer, theme switch, live
// indicator) and the hash router (#/session, #/admin/keys...).
import { h, mount, api, setAuth, notice } from './lib.js';
import * as live from './live.js';
import { claims, expiresIn, readToken, storeToken, clearToken, takeHashToken, finishOIDC, signInScreen } from './auth.js';
import { landing } from './landing.js';
import * as client from './client.js';
import * as store from './store.js';
import * as admin from './admin.js';
import { messages } from './messages.js';
import { campaigns } from './campaigns.js';
import { webhooks } from './webhooks.js';
import { cloud } from './cloud.js';
import { optouts } from './optouts.js';

const root = document.getElementById('app');

const clientScreens = [
  ['session', 'Phone', client.session],
  ['cloud', 'Cloud API', cloud],
  ['messages', 'Messages', messages],
  ['send', 'Send', client.send],
  ['campaigns', 'Campaigns', campaigns],
  ['templates', 'Templates', store.templates],
  ['store', 'Store', store.store],
  ['optouts', 'Opt-outs', optouts],
  ['keys', 'API keys', client.keys],
  ['usage', 'Usage', client.usage],
  ['webhooks', 'Webhooks', webhooks],
];
const adminScreens = [
  ['admin/users', 'Users', admin.users],
  ['admin/keys', 'Keys', admin.keys],
  ['admin/sessions', 'Sessions', admin.sessions],
];
// A node of a cluster (its config says so) adds the cluster's screen.
let clusterOn = false;
const admins = () => (clusterOn ? [...adminScreens, ['admin/cluster', 'Cluster', admin.cluster]] : adminScreens);

// The theme: the system's preference unless the header's switch picked one (kept per browser).
const themes = ['system', 'light', 'dark'];
const themeNames = { system: 'as the system', light: 'light', dark: 'dark' };
function theme() { const t = localStorage.getItem('gateway.theme'); return themes.includes(t) ? t : 'system'; }
function applyTheme(t) {
  if (t === 'system') { delete document.documentElement.dataset.theme; localStorage.removeItem('gateway.theme'); }
  else { document.documentElement.dataset.theme = t; localStorage.setItem('gateway.theme', t); }
}
applyTheme(theme());

let cfg = null;
let me = null;
let cleanup = null;
let expiryTimer = null;

// The sign-in configuration is fetched at once, but only the sign-in screen and the OIDC return
// wait for it: a page opened with a token goes straight to its first screen.
const config = fetch('/dashboard/config.json', { cache: 'no-store' }).then((r) => r.json());
config.catch(() => {}); // reported where it is awaited
config.then((c) => {
  if (!c || !c.cluster || clusterOn) return;
  clusterOn = true;
  if (me && me.admin && view) { shell(); route(); }
}, () => {});

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
  live.stop();
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
  // The role claim (dev tokens) is a hint for the first screen; the profile's role decides, in
  // parallel, so a client's first screen does not wait for it.
  me = { uid: c.sub, name: c.name || c.email || c.sub, admin: c.role === 'admin' };
  const user = me;
  api('GET', '/api/client/me').then((p) => {
    if (me !== user) return;
    const admin = p.role === 'admin';
    if (p.name) me.name = p.name;
    if (admin === me.admin) return;
    me.admin = admin;
    shell();
    route();
  }, () => {});
  live.start(token);
  shell();
  if (!location.hash || location.hash === '#/' || location.hash === '#') location.hash = me.admin ? '#/admin/keys' : '#/session';
  else route();
}

let view = null;
let nav = null;
let menu = null;
let backdrop = null;
let unwatch = null;

// The drawer (narrow screens): the menu button opens it; a link, the backdrop or Escape closes it.
function drawer(open) {
  if (!nav) return;
  nav.classList.toggle('open', open);
  backdrop.classList.toggle('open', open);
  menu.setAttribute('aria-expanded', String(open));
  if (open) (nav.querySelector('a.active') || nav.querySelector('a')).focus();
}

function shell() {
  const link = ([id, title]) => h('a', { href: '#/' + id, 'data-route': id, onclick: () => drawer(false) }, title);
  nav = h('nav', { id: 'nav', 'aria-label': 'Screens' },
    h('div', { class: 'who-small' }, me.name),
    h('div', { class: 'group' }, h('span', { class: 'label' }, 'Your shop'), clientScreens.map(link)),
    me.admin ? h('div', { class: 'group' }, h('span', { class: 'label' }, 'Admin'), admins().map(link)) : null,
    h('div', { class: 'group' }, h('a', { href: '/docs', target: '_blank', rel: 'noopener' }, 'API reference')));
  view = h('main', { id: 'view' });
  menu = h('button', { type: 'button', class: 'ghost', id: 'menu', 'aria-controls': 'nav', 'aria-expanded': 'false', 'aria-label': 'Open the menu',
    onclick: () => drawer(!nav.classList.contains('open')) }, '☰');
  backdrop = h('div', { class: 'backdrop', onclick: () => drawer(false) });
  const status = h('span', { class: 'live', id: 'live', role: 'status' });
  const themeBtn = h('button', { type: 'button', class: 'small ghost', id: 'theme' });
  const showTheme = () => {
    const t = theme();
    themeBtn.textContent = t === 'dark' ? '☾' : t === 'light' ? '☀' : '◐';
    themeBtn.setAttribute('aria-label', 'Theme: ' + themeNames[t] + '. Switch it.');
    themeBtn.title = 'Theme: ' + themeNames[t];
    themeBtn.dataset.theme = t;
  };
  themeBtn.addEventListener('click', () => { applyTheme(themes[(themes.indexOf(theme()) + 1) % themes.length]); showTheme(); });
  showTheme();
  if (unwatch) unwatch();
  unwatch = live.watch((st) => {
    status.dataset.state = st;
    status.textContent = st === 'live' ? 'Live' : st === 'reconnecting' ? 'Reconnecting…' : '';
  });
  mount(root, h('header', { class: 'top' }, menu,
    h('a', { class: 'brand', href: '#/' }, 'gateway'),
    status, themeBtn,
    h('span', { class: 'who' }, h('span', { class: 'name' }, me.name), me.admin ? h('span', { class: 'badge t-info' }, 'admin') : null),
    h('button', { type: 'button', class: 'small ghost', id: 'signout', onclick: () => signOut('You are signed out.') }, 'Sign out')),
  h('div', { class: 'layout' }, nav, backdrop, view));
}

document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && nav && nav.classList.contains('open')) { drawer(false); menu.focus(); }
});

function stopScreen() {
  if (cleanup) { try { cleanup(); } catch { /* ignore */ } cleanup = null; }
}

function route() {
  if (!me || !view) return;
  const id = location.hash.replace(/^#\/?/, '').split('?')[0];
  const all = me.admin ? [...clientScreens, ...admins()] : clientScreens;
  const found = all.find(([sid]) => sid === id);
  if (!found) { location.hash = me.admin ? '#/admin/keys' : '#/session'; return; }
  stopScreen();
  drawer(false);
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
