// messages.js: the Messages screen: what the phone sent and received in the last 7 days, newest
// first, with statuses that change as the events come (queued → sent → delivered → read),
// filters, and a reply to an incoming message.
import { h, mount, api, when, say, field, form, badge, sentence, notice, phoneDigits } from './lib.js';
import * as live from './live.js';

const kindNames = { image: 'Photo', video: 'Video', audio: 'Voice message', document: 'Document', location: 'Location', contact: 'Contact' };

function content(m) {
  if (m.type === 'text' || !m.type) return m.text || '';
  const label = kindNames[m.type] || m.type;
  return '[' + label + (m.fileName ? ': ' + m.fileName : '') + ']' + (m.caption ? ' ' + m.caption : '') + (m.text ? ' ' + m.text : '');
}

export function messages(el) {
  const subs = live.subscriptions();
  const slot = h('div', { class: 'slot' });
  const list = h('ol', { class: 'msgs', id: 'msg-list', 'aria-live': 'polite', 'aria-label': 'Messages, newest first' });
  const more = h('div', {});
  const direction = h('select', { name: 'direction', id: 'msg-direction' },
    h('option', { value: '' }, 'Sent and received'), h('option', { value: 'out' }, 'Sent'), h('option', { value: 'in' }, 'Received'));
  const status = h('select', { name: 'status', id: 'msg-status' }, h('option', { value: '' }, 'Any'),
    ['queued', 'sent', 'delivered', 'read', 'failed'].map((s) => h('option', { value: s }, badge(s).textContent)));
  const phone = h('input', { name: 'phone', id: 'msg-phone', inputmode: 'tel', placeholder: '4915112345678', size: 16 });
  let next = '';
  let gen = 0;
  const shown = new Map(); // key (direction + id) → li

  const query = () => {
    const q = new URLSearchParams({ limit: '50' });
    if (direction.value) q.set('direction', direction.value);
    if (status.value) q.set('status', status.value);
    const p = phoneDigits(phone.value);
    if (p) {
      if (direction.value !== 'in') q.set('to', p);
      if (direction.value !== 'out') q.set('from', p);
    }
    return q;
  };
  // matches tells whether a message the events announce belongs in the list as filtered.
  const matches = (dir, st, peer) => {
    if (direction.value && direction.value !== dir) return false;
    if (status.value && (dir === 'in' || status.value !== st)) return false;
    const p = phoneDigits(phone.value);
    return !p || p === peer;
  };

  const item = (m) => {
    const out = m.direction === 'out';
    const li = h('li', { class: 'msg ' + (out ? 'out' : 'in'), 'data-id': m.id, 'data-direction': m.direction, 'data-status': out ? m.status : 'received' });
    fill(li, m);
    return li;
  };
  const fill = (li, m) => {
    const out = m.direction === 'out';
    li.dataset.status = out ? m.status : 'received';
    li._m = m;
    const reply = h('div', { class: 'reply-slot' });
    mount(li,
      h('div', { class: 'meta' },
        h('strong', {}, (out ? 'To +' + m.to : 'From +' + m.from)),
        h('span', {}, when(out ? m.created_at : m.timestamp)),
        out ? badge(m.status) : badge('received')),
      h('div', { class: 'text' }, content(m) || h('span', { class: 'muted' }, '…')),
      out && m.status === 'failed' ? h('div', { class: 'why' }, m.error || m.code || '') : null,
      !out ? h('button', { type: 'button', class: 'small ghost', 'data-reply': m.from, onclick: () => replyForm(reply, m) }, 'Reply') : null,
      reply);
  };
  const replyForm = (box, m) => {
    if (box.firstChild) { box.replaceChildren(); return; }
    const text = h('textarea', { name: 'text', rows: 2, required: true });
    const out = h('div', {});
    mount(box, form({ class: 'reply' }, [field('Reply to +' + m.from, text), h('button', { type: 'submit' }, 'Send reply'), out], async () => {
      try {
        await api('POST', '/api/client/send', { phone: m.from, type: 'text', text: text.value });
        box.replaceChildren();
      } catch (e) { mount(out, notice('error', sentence(e))); }
    }));
    text.focus();
  };
  const put = (m, top) => {
    const key = m.direction + ':' + m.id;
    const old = shown.get(key);
    if (old) { fill(old, m); return old; }
    const li = item(m);
    shown.set(key, li);
    if (top) list.prepend(li); else list.append(li);
    return li;
  };
  const showEmpty = () => {
    const empty = el.querySelector('#msg-empty');
    if (shown.size === 0 && !empty) list.after(h('p', { class: 'empty', id: 'msg-empty' }, 'No message yet. What your phone sends and receives in the last 7 days shows here.'));
    if (shown.size > 0 && empty) empty.remove();
  };
  const load = async (older) => {
    const mine = older ? gen : ++gen;
    const q = query();
    if (older) q.set('cursor', next);
    try {
      const r = await api('GET', '/api/client/messages?' + q);
      if (mine !== gen) return; // the filters changed meanwhile
      if (!older) { shown.clear(); list.replaceChildren(); }
      for (const m of r.messages) put(m, false);
      next = r.next || '';
      mount(more, next ? h('button', { type: 'button', class: 'ghost', id: 'msg-more', onclick: () => load(true) }, 'Show older messages') : null);
      say(slot, '', '');
      showEmpty();
    } catch (e) { say(slot, 'error', sentence(e)); }
  };
  // A message queued elsewhere (an API key, a campaign) shows at once; its text comes with the
  // next read of the first page.
  let refill = null;
  const refillSoon = () => { clearTimeout(refill); refill = setTimeout(() => refreshTop(), 300); };
  const refreshTop = async () => {
    try {
      const r = await api('GET', '/api/client/messages?' + query());
      for (const m of r.messages.slice().reverse()) {
        const li = shown.get(m.direction + ':' + m.id);
        if (li) {
          // Keep the newest status the events gave: the read may be older than an event.
          if (li._m && li._m.direction === 'out' && rank(li._m.status) > rank(m.status)) m.status = li._m.status;
          fill(li, m);
        } else put(m, true);
      }
      showEmpty();
    } catch { /* the list stays; the next event or reload tries again */ }
  };

  subs.on('message.status', (d) => {
    const li = shown.get('out:' + d.messageId);
    if (li) {
      const m = { ...li._m, status: rank(d.status) >= rank(li._m.status) ? d.status : li._m.status };
      if (d.status === 'failed') { m.code = d.code; m.error = d.error; }
      fill(li, m);
      return;
    }
    if (!matches('out', d.status, d.to)) return;
    put({ direction: 'out', id: d.messageId, message_id: d.messageId, to: d.to, session: d.session, status: d.status, created_at: d.at, type: 'text', text: '' }, true);
    showEmpty();
    refillSoon();
  });
  subs.on('message.received', (d) => {
    if (!matches('in', '', d.from)) return;
    put({ direction: 'in', ...d }, true);
    showEmpty();
  });
  subs.on('resync', () => load(false));

  for (const c of [direction, status]) c.addEventListener('change', () => load(false));
  phone.addEventListener('change', () => load(false));
  mount(el,
    h('section', { class: 'card' },
      h('form', { class: 'filters', id: 'msg-filters', onsubmit: (e) => { e.preventDefault(); load(false); } },
        field('Show', direction), field('Status of sent ones', status), field('Phone number', phone),
        h('div', { class: 'field' }, h('button', { type: 'submit', class: 'ghost' }, 'Filter'))),
      h('p', { class: 'muted' }, 'Statuses change here as they happen: waiting to send, sent, delivered, read.')),
    h('section', { class: 'card' }, slot, list, more));
  load(false);
  return () => { subs.stop(); clearTimeout(refill); };
}

function rank(s) {
  return { queued: 0, sent: 1, delivered: 2, read: 3, failed: 4 }[s] ?? -1;
}
