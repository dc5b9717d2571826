// live.js: the signed-in user's events as they happen (GET /api/client/events/stream, Server-
// Sent Events with the webhooks' types and bodies). Screens subscribe with on(type, fn) and get
// each event's data; on('resync', fn) runs after a reconnect, when events may have been missed
// and a screen reloads what it shows. The browser's EventSource reconnects by itself; a stream
// the gateway refused (an expired sign-in) is retried every 5 s until the app signs out.

const types = ['message.status', 'message.received', 'message.reaction', 'message.edited', 'message.revoked', 'poll.vote', 'session.status', 'session.warning', 'campaign.progress', 'campaign.completed', 'store.event'];
const handlers = new Map();
const watchers = new Set();
let source = null;
let token = null;
let opened = 0;
let retry = null;
let state = 'off';

function setState(s) {
  state = s;
  for (const w of watchers) w(s);
}

function emit(type, data) {
  for (const fn of handlers.get(type) || []) {
    try { fn(data); } catch (e) { console.warn('live handler', type, e); }
  }
}

function connect() {
  clearTimeout(retry);
  const es = new EventSource('/api/client/events/stream?token=' + encodeURIComponent(token));
  source = es;
  es.onopen = () => {
    if (source !== es) return;
    setState('live');
    if (opened++ > 0) emit('resync');
  };
  es.onerror = () => {
    if (source !== es) return;
    if (es.readyState === EventSource.CLOSED) {
      setState('reconnecting');
      retry = setTimeout(() => { if (source === es) connect(); }, 5000);
    } else setState('reconnecting');
  };
  for (const t of types) {
    es.addEventListener(t, (e) => {
      let body;
      try { body = JSON.parse(e.data); } catch { return; }
      emit(t, body.data || {});
    });
  }
}

/** start opens the stream for this ID token (stopping any other). */
export function start(idToken) {
  stop();
  token = idToken;
  opened = 0;
  connect();
}

/** stop closes the stream (sign-out). */
export function stop() {
  clearTimeout(retry);
  if (source) source.close();
  source = null;
  token = null;
  setState('off');
}

/** on calls fn with the data of every event of type; it returns the unsubscribe. */
export function on(type, fn) {
  if (!handlers.has(type)) handlers.set(type, new Set());
  handlers.get(type).add(fn);
  return () => handlers.get(type).delete(fn);
}

/** watch calls fn with the stream's state (off, live, reconnecting), now and on each change. */
export function watch(fn) {
  watchers.add(fn);
  fn(state);
  return () => watchers.delete(fn);
}

/** subscriptions collects a screen's subscriptions so its cleanup drops them all. */
export function subscriptions() {
  const offs = [];
  return { on: (type, fn) => offs.push(on(type, fn)), stop: () => offs.splice(0).forEach((f) => f()) };
}
