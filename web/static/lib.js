// lib.js: the dashboard's whole toolkit: h() builds DOM nodes, api() calls the gateway and
// turns its errors into sentences, poll() repeats a task until stopped. No framework: each
// screen is a function that renders into a container and returns its cleanup.

/** h(tag, attrs, ...children): an element. attrs: class, on<event>, value, checked, etc. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'selected') el[k] = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

/** mount replaces el's children. */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** ApiError is a failed call: status, code, and a sentence a person can read. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const sentences = {
  missing_credentials: 'You are not signed in.',
  invalid_token: 'Your sign-in has expired. Sign in again.',
  forbidden: 'Your account is not allowed to do this.',
  internal_only: 'This is open only to administrators.',
  session_not_connected: 'Your phone is not linked yet: link it on the Session page first.',
  already_connected: 'Your phone is already linked.',
  rate_limited: 'The daily request limit is reached; it resets at midnight UTC.',
  quota_exceeded: "This month's message allowance is used up.",
  invalid_phone: 'That phone number is not valid: use 8 to 15 digits with the country code.',
  recipient_not_on_network: 'That number is not on the messaging network.',
  opted_out: 'That customer opted out of your messages (they replied STOP); see Opt-outs.',
  message_not_found: 'That message is none of your messages of the last 7 days.',
  group_not_found: 'That group is not one your phone is in.',
  network_error: 'The messaging network did not answer. Try again in a moment.',
  store_platform_error: 'The store platform did not answer as expected. Try again in a moment.',
  store_token_rejected: 'The store platform refused that access token.',
  store_connected_elsewhere: 'That store is already connected to another account.',
  unavailable: 'The gateway is busy or its storage is unavailable. Try again in a moment.',
  idp_unavailable: 'The sign-in provider cannot be reached. Try again in a moment.',
  internal: 'Something went wrong on the gateway. Try again; if it persists, tell an administrator.',
};

/** sentence turns an API error into a sentence: a known code's own words, else the API's text. */
export function sentence(err) {
  if (!(err instanceof ApiError)) return err && err.message ? 'Could not reach the gateway: ' + err.message + '.' : 'Could not reach the gateway.';
  if (sentences[err.code]) return sentences[err.code];
  let t = (err.message || 'The request failed').trim();
  t = t.charAt(0).toUpperCase() + t.slice(1);
  return /[.!?]$/.test(t) ? t : t + '.';
}

let bearer = null;
let onAuthLost = () => {};

/** setAuth sets the ID token sent with every call and what happens when it stops working. */
export function setAuth(token, lost) {
  bearer = token;
  if (lost) onAuthLost = lost;
}

/** api calls the gateway; it resolves to the decoded JSON or throws an ApiError. */
export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (bearer) headers.Authorization = 'Bearer ' + bearer;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  let data = null;
  const text = await res.text();
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const err = new ApiError(res.status, (data && data.code) || 'http_' + res.status, (data && data.error) || res.statusText);
    if (res.status === 401 && bearer && (err.code === 'invalid_token' || err.code === 'missing_credentials')) onAuthLost(err);
    throw err;
  }
  return data;
}

/** poll runs task now and every ms until stop(); a task that throws is tried again next time. */
export function poll(task, ms) {
  let timer = null, stopped = false;
  const run = async () => {
    if (stopped) return;
    try { await task(); } catch { /* shown by the task itself */ }
    if (!stopped) timer = setTimeout(run, typeof ms === 'function' ? ms() : ms);
  };
  run();
  return { stop() { stopped = true; clearTimeout(timer); } };
}

/** when formats an RFC 3339 time for people (local time), or a dash. */
export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

/** notice is a message line: kind ok, error or info. */
export function notice(kind, text) {
  return h('p', { class: 'notice ' + kind, role: kind === 'error' ? 'alert' : 'status' }, text);
}

/** status shows a message in a slot element (replacing what it showed). */
export function say(slot, kind, text) {
  mount(slot, text ? notice(kind, text) : null);
}

/** field is a labelled input. */
export function field(label, input, hint) {
  return h('label', { class: 'field' }, h('span', {}, label), input, hint ? h('small', {}, hint) : null);
}

/** form builds a form whose submit runs fn with the button disabled meanwhile. */
export function form(attrs, children, fn) {
  const f = h('form', attrs, children);
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    const btns = f.querySelectorAll('button');
    btns.forEach((b) => (b.disabled = true));
    try { await fn(f); } finally { btns.forEach((b) => (b.disabled = false)); }
  });
  return f;
}

/**
 * table renders rows with the given columns [{title, cell(row), label?}]. A column whose title
 * is hidden (actions) passes label for screen readers. On a phone each row is a card whose
 * cells carry their column's title (app.css).
 */
export function table(cols, rows, empty, rowAttrs) {
  if (!rows.length) return h('p', { class: 'empty' }, empty || 'Nothing yet.');
  return h('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': cols.map((c) => c.title || c.label).filter(Boolean).slice(0, 3).join(', ') },
    h('table', {},
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', {}, c.title || h('span', { class: 'sr-only' }, c.label || 'Actions'))))),
      h('tbody', {}, rows.map((r) => h('tr', rowAttrs ? rowAttrs(r) : {}, cols.map((c) => h('td', { 'data-label': c.title || '' }, c.cell(r))))))));
}

// Statuses in words a person reads, with a tone (the badge's colour): ok, warn, err, info.
const words = {
  // Sessions.
  CONNECTED: ['Linked', 'ok'], SCAN_QR: ['Waiting for you to scan', 'warn'], DISCONNECTED: ['Reconnecting', 'warn'],
  NOT_CREATED: ['Not linked yet', 'info'], LOGGED_OUT: ['Unlinked from the phone', 'err'], BANNED: ['Blocked by the network', 'err'],
  RESTRICTED: ['Limited by the network', 'warn'],
  // Messages.
  queued: ['Waiting to send', 'warn'], sent: ['Sent', 'info'], delivered: ['Delivered', 'ok'], read: ['Read', 'ok'], failed: ['Not sent', 'err'],
  received: ['Received', 'info'], scheduled: ['Scheduled', 'info'], opted_out: ['Opted out', 'info'],
  // Order confirmations.
  awaiting: ['Waiting for the answer', 'warn'], confirmed: ['Confirmed', 'ok'], none: ['Not written back', 'info'],
  // Campaigns.
  running: ['Sending', 'warn'], completed: ['Done', 'ok'], cancelled: ['Cancelled', 'err'],
  // Keys, webhooks, stores.
  active: ['Active', 'ok'], revoked: ['Revoked', 'err'], expired: ['Expired', 'err'], failing: ['Failing', 'warn'], disabled: ['Turned off', 'err'],
  connected: ['Connected', 'ok'], pending: ['Waiting', 'warn'], skipped: ['Skipped', 'info'], done: ['Done', 'ok'],
  admin: ['Admin', 'info'], client: ['Client', 'info'],
};

/** word is a status in words ("SCAN_QR" → "Waiting for you to scan"). */
export function word(status) {
  if (!status) return '—';
  if (words[status]) return words[status][0];
  const t = String(status).toLowerCase().replace(/_/g, ' ');
  return t.charAt(0).toUpperCase() + t.slice(1);
}

/** badge is a status label in words; data-status keeps the API's value. */
export function badge(status, text) {
  const tone = (words[status] || [])[1];
  return h('span', { class: 'badge' + (tone ? ' t-' + tone : ''), 'data-status': status || '' }, text || word(status));
}

/**
 * confirmInline asks in the page (not a browser dialog) before fn runs: the question with a
 * confirm and a cancel button, in slot. cancel runs when declined.
 */
export function confirmInline(slot, question, yes, fn, cancel) {
  const box = h('div', { class: 'confirm', role: 'alertdialog', 'aria-label': question },
    h('span', {}, question),
    h('button', { type: 'button', class: 'small', 'data-confirm': 'yes', onclick: async () => { box.remove(); await fn(); } }, yes),
    h('button', { type: 'button', class: 'small ghost', 'data-confirm': 'no', onclick: () => { box.remove(); if (cancel) cancel(); } }, 'Cancel'));
  mount(slot, box);
  box.querySelector('button').focus();
}

/** phoneDigits is a phone number as the gateway keeps it (digits), or null when the gateway would refuse it. */
export function phoneDigits(v) {
  const s = String(v == null ? '' : v).trim();
  if (/[^0-9+ ().-]/.test(s)) return null;
  const d = s.replace(/[^0-9]/g, '');
  return d.length >= 8 && d.length <= 15 ? d : null;
}
/** copyButton copies text to the clipboard. */
export function copyButton(text, label = 'Copy') {
  const b = h('button', { type: 'button', class: 'small', onclick: async () => {
    try { await navigator.clipboard.writeText(typeof text === 'function' ? text() : text); b.textContent = 'Copied'; }
    catch { b.textContent = 'Select and copy it'; }
    setTimeout(() => (b.textContent = label), 1500);
  } }, label);
  return b;
}

/** unavailable says a screen's API is not on this gateway yet (a 404 from a route another issue adds). */
export function unavailable(what) {
  return notice('info', what + ' is not available on this gateway yet: its API is not served. This page lights up when it is.');
}
