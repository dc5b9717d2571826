// auth.js: signing in. Three ways, chosen by the gateway's /dashboard/config.json:
//   dev auth:  a form that mints a token through POST /api/dev/token;
//   OIDC:      the authorization-code flow with PKCE against the issuer;
//   Firebase:  email and password through the Identity Toolkit REST API.
// In every mode #token=<ID token> in the address signs in. The token is kept in this tab's
// sessionStorage only, and taken out of the address at once.

import { h, mount, api, field, form, say, sentence } from './lib.js';

const TOKEN = 'gateway.idToken';
const PKCE = 'gateway.pkce';

/** claims decodes a JWT's payload (no verification: the gateway verifies). */
export function claims(token) {
  try {
    const p = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(decodeURIComponent(escape(atob(p))));
  } catch {
    return {};
  }
}

/** expiresIn is how many ms the token has left (Infinity without exp). */
export function expiresIn(token) {
  const exp = claims(token).exp;
  return typeof exp === 'number' ? exp * 1000 - Date.now() : Infinity;
}

export function readToken() {
  const t = sessionStorage.getItem(TOKEN);
  if (t && expiresIn(t) > 1000) return t;
  if (t) sessionStorage.removeItem(TOKEN);
  return null;
}

export function storeToken(t) { sessionStorage.setItem(TOKEN, t); }
export function clearToken() { sessionStorage.removeItem(TOKEN); }

/** takeHashToken reads #token=... and removes it from the address and the history entry. */
export function takeHashToken() {
  const m = /^#token=([^&]+)/.exec(location.hash);
  if (!m) return null;
  history.replaceState(null, '', location.pathname + '#/');
  return decodeURIComponent(m[1]);
}

function b64url(bytes) {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random(n) { return b64url(crypto.getRandomValues(new Uint8Array(n))); }

function redirectURI() { return location.origin + '/dashboard/'; }

async function startOIDC(o) {
  if (!crypto.subtle) throw new Error('this page must be served over HTTPS (or from localhost) to sign in');
  const verifier = random(32), state = random(16), nonce = random(16);
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state, nonce }));
  const u = new URL(o.authorizationEndpoint);
  u.searchParams.set('response_type', 'code');
  u.searchParams.set('client_id', o.clientId);
  u.searchParams.set('redirect_uri', redirectURI());
  u.searchParams.set('scope', 'openid email profile');
  u.searchParams.set('state', state);
  u.searchParams.set('nonce', nonce);
  u.searchParams.set('code_challenge', b64url(new Uint8Array(digest)));
  u.searchParams.set('code_challenge_method', 'S256');
  location.assign(u.toString());
}

/**
 * finishOIDC completes the code flow when the issuer sent the browser back with ?code= (or
 * ?error=). It resolves to the ID token, or null when this is not a return from the issuer;
 * it throws with a readable message when the sign-in failed. The query is always removed.
 */
export async function finishOIDC(cfg) {
  const q = new URLSearchParams(location.search);
  if (!q.has('code') && !q.has('error')) return null;
  history.replaceState(null, '', location.pathname + '#/');
  const saved = JSON.parse(sessionStorage.getItem(PKCE) || 'null');
  sessionStorage.removeItem(PKCE);
  if (q.has('error')) throw new Error('the sign-in provider said: ' + (q.get('error_description') || q.get('error')));
  if (!cfg.oidc || !cfg.oidc.tokenEndpoint) throw new Error('this gateway has no OIDC sign-in configured');
  if (!saved || saved.state !== q.get('state')) throw new Error('the sign-in answer does not match a sign-in started here; start again');
  const res = await fetch(cfg.oidc.tokenEndpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: q.get('code'), redirect_uri: redirectURI(), client_id: cfg.oidc.clientId, code_verifier: saved.verifier }),
  });
  const data = await res.json().catch(() => ({}));
  if (!res.ok || !data.id_token) throw new Error('the sign-in provider refused the code: ' + (data.error_description || data.error || res.status));
  if (claims(data.id_token).nonce !== saved.nonce) throw new Error('the ID token does not carry this sign-in’s nonce; start again');
  return data.id_token;
}

const firebaseErrors = {
  INVALID_LOGIN_CREDENTIALS: 'The email or password is wrong.',
  EMAIL_NOT_FOUND: 'The email or password is wrong.',
  INVALID_PASSWORD: 'The email or password is wrong.',
  INVALID_EMAIL: 'That is not a valid email address.',
  USER_DISABLED: 'This account is disabled.',
  TOO_MANY_ATTEMPTS_TRY_LATER: 'Too many attempts: try again later.',
};

async function firebaseSignIn(fb, email, password) {
  const res = await fetch(fb.authUrl + '/v1/accounts:signInWithPassword?key=' + encodeURIComponent(fb.apiKey), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email, password, returnSecureToken: true }),
  });
  const data = await res.json().catch(() => ({}));
  if (!res.ok || !data.idToken) {
    const code = String((data.error && data.error.message) || res.status).split(' ')[0];
    throw new Error(firebaseErrors[code] || 'Sign-in failed: ' + code + '.');
  }
  return data.idToken;
}

/** signInScreen renders every sign-in this gateway offers; onToken gets the new ID token. */
export function signInScreen(root, cfg, message, onToken) {
  const slot = h('div', { class: 'slot' });
  const parts = [];

  if (cfg.devSignIn) {
    const uid = h('input', { name: 'uid', required: true, value: 'alice', autocomplete: 'username' });
    const name = h('input', { name: 'name', value: '' , placeholder: 'Alice' });
    const email = h('input', { name: 'email', type: 'email', placeholder: 'alice@example.com' });
    const role = h('select', { name: 'role' }, h('option', { value: 'client' }, 'client'), h('option', { value: 'admin' }, 'admin'));
    parts.push(h('section', { class: 'card' }, h('h2', {}, 'Sign in (development)'),
      h('p', { class: 'muted' }, 'This gateway runs the embedded dev issuer: pick any user id. Admins manage keys, users and sessions.'),
      form({ id: 'dev-signin' }, [field('User id', uid), field('Name', name), field('Email', email), field('Role', role),
        h('button', { type: 'submit' }, 'Sign in')], async () => {
        try {
          const r = await api('POST', '/api/dev/token', { uid: uid.value.trim(), name: name.value.trim(), email: email.value.trim(), role: role.value });
          onToken(r.token);
        } catch (e) { say(slot, 'error', sentence(e)); }
      })));
  } else if (cfg.auth === 'dev') {
    parts.push(h('section', { class: 'card' }, h('h2', {}, 'Sign in'),
      h('p', {}, 'The dev sign-in form is open only on the gateway’s internal addresses. Ask for a sign-in link (`gateway token`) or paste a token below.')));
  }

  if (cfg.oidc) {
    const o = cfg.oidc;
    parts.push(h('section', { class: 'card' }, h('h2', {}, 'Sign in'),
      o.error ? h('p', { class: 'notice error' }, 'The sign-in provider cannot be reached: ' + o.error + '.') : null,
      h('button', { type: 'button', id: 'oidc-signin', disabled: !o.authorizationEndpoint, onclick: async () => {
        try { await startOIDC(o); } catch (e) { say(slot, 'error', 'Cannot start the sign-in: ' + e.message + '.'); }
      } }, 'Sign in with ' + new URL(o.issuer).host)));
  }

  if (cfg.firebase) {
    const email = h('input', { name: 'email', type: 'email', required: true, autocomplete: 'username' });
    const pw = h('input', { name: 'password', type: 'password', required: true, autocomplete: 'current-password' });
    parts.push(h('section', { class: 'card' }, h('h2', {}, 'Sign in with email'),
      form({ id: 'firebase-signin' }, [field('Email', email), field('Password', pw), h('button', { type: 'submit' }, 'Sign in')], async () => {
        try {
          const t = await firebaseSignIn(cfg.firebase, email.value.trim(), pw.value);
          pw.value = '';
          onToken(t);
        } catch (e) { pw.value = ''; say(slot, 'error', e.message); }
      })));
  }

  if (!parts.length) {
    parts.push(h('section', { class: 'card' }, h('h2', {}, 'Sign in'),
      h('p', {}, 'This gateway verifies ID tokens from ' + ((cfg.oidc && cfg.oidc.issuer) || 'its identity provider') +
        ', but no dashboard sign-in is configured: start it with --dashboard-client-id (OIDC) or --firebase-api-key (Firebase), or paste an ID token below.')));
  }

  const pasted = h('textarea', { rows: 3, placeholder: 'eyJhbGciOi…', autocomplete: 'off', spellcheck: 'false' });
  parts.push(h('details', { class: 'card' }, h('summary', {}, 'Sign in with an ID token'),
    form({}, [field('ID token', pasted), h('button', { type: 'submit' }, 'Use this token')], async () => {
      const t = pasted.value.trim();
      pasted.value = '';
      if (t.split('.').length !== 3) return say(slot, 'error', 'That is not an ID token (a JWT has three parts separated by dots).');
      if (expiresIn(t) <= 0) return say(slot, 'error', 'That token has expired.');
      onToken(t);
    })));

  mount(root, h('main', { class: 'signin' },
    h('h1', {}, 'gateway'),
    message ? h('p', { class: 'notice info', role: 'status', id: 'signin-message' }, message) : null,
    slot, parts,
    h('p', { class: 'muted' }, h('a', { href: '/docs' }, 'API reference'))));
}
