// messages.js: the Messages screen: what the phone sent and received in the last 7 days, newest
// first, with statuses that change as the events come (queued → sent → delivered → read),
// filters, and each message's conversation: the message it quotes, its reactions, its edit or
// revoke, a poll's results, all live; a reply to any message and a reaction from it.
import { h, mount, api, when, say, field, form, badge, sentence, notice, phoneDigits } from './lib.js';
import * as live from './live.js';

const kindNames = { image: 'Photo', video: 'Video', audio: 'Audio', document: 'Document', sticker: 'Sticker', location: 'Location', contact: 'Contact' };
// The emojis a reaction offers (WhatsApp's own first six).
const emojis = ['👍', '❤️', '😂', '😮', '😢', '🙏'];
// Kinds that are about another message: shown on it, never as a line of their own.
const about = new Set(['reaction', 'edit', 'revoke']);

const kindOf = (m) => m.kind || m.type || 'text';

/** who names a contact: +phone, else its LID, else the group's member we cannot name. */
function who(phone, lid) {
  return phone ? '+' + phone : lid || 'someone';
}

/** content is what a message says, by its kind (a poll's results are drawn apart). */
function content(m) {
  const kind = kindOf(m);
  if (kind === 'text') return m.text || '';
  const cloud = cloudContent(m, kind);
  if (cloud !== null) return cloud;
  if (kind === 'poll') return '';
  let label = kindNames[kind] || kind;
  if (kind === 'audio' && m.ptt) label = 'Voice message';
  const parts = [];
  if (kind === 'location') {
    parts.push(m.name || m.text, m.address, m.lat || m.lng ? `(${m.lat}, ${m.lng})` : '');
  } else if (kind === 'contact') {
    parts.push(m.contactName || m.text, m.contactPhone ? '+' + m.contactPhone : '');
  } else {
    parts.push(m.caption, m.text);
  }
  const detail = parts.filter(Boolean).join(' ');
  return '[' + label + (m.fileName ? ': ' + m.fileName : '') + ']' + (detail ? ' ' + detail : '');
}

/** cloudContent is what a Cloud API kind says (a template, buttons, a list, a tap); null for others. */
function cloudContent(m, kind) {
  if (kind === 'template') return '[Template ' + (m.template ? m.template.name : '') + '] ' + (m.text || (m.template ? (m.template.parameters || []).join(' · ') : ''));
  if (kind === 'buttons') return (m.text || '') + ' [' + (m.buttons || []).map((b) => b.title).join(' | ') + ']';
  if (kind === 'list') return (m.text || '') + ' [List: ' + (m.button || '') + ']';
  if (kind === 'button_reply') return '[Tapped] ' + (m.text || m.buttonId || '');
  return null;
}

/** viaView says which way a message went when the account routes (linked phone or Cloud API number), and why. */
const viaWords = { warm: 'the contact knows the phone', cold: 'a new contact', timelock: 'the phone is held back for new contacts', window: 'inside the 24-hour window' };
function viaView(m) {
  if (!m.via) return null;
  const label = m.via === 'cloud' ? 'Cloud API' : 'Phone';
  const why = viaWords[m.viaReason];
  return h('span', { class: 'via', 'data-via': m.via, 'data-reason': m.viaReason || '', title: why ? 'Why: ' + why : '' }, 'via ' + label + (why ? ' (' + why + ')' : ''));
}

/** pollOf is a poll's question and results: the history's, or an incoming poll's with no vote yet. */
function pollOf(m) {
  if (m.poll) return m.poll;
  if (kindOf(m) !== 'poll') return null;
  return { question: m.question || '', multiple: !!m.multiple, options: (m.options || []).map((name) => ({ name, count: 0, voters: [] })) };
}

/** vote replaces a voter's choices in a poll's results (poll.vote: none takes the vote back). */
function vote(poll, voter, chosen) {
  const options = poll.options.map((o) => {
    const voters = o.voters.filter((v) => v !== voter);
    if (chosen.includes(o.name)) voters.push(voter);
    return { ...o, voters, count: voters.length };
  });
  return { ...poll, options };
}

/** react replaces one person's reaction in a message's reactions ("" takes it back). */
function react(reactions, d) {
  const key = (r) => (r.fromMe ? 'me' : r.from || r.lid);
  const k = key(d);
  const rest = (reactions || []).filter((r) => key(r) !== k);
  return d.emoji ? [...rest, { from: d.from, lid: d.lid, fromMe: d.fromMe, emoji: d.emoji, at: d.at }] : rest;
}

function pollView(p) {
  const voters = new Set(p.options.flatMap((o) => o.voters));
  return h('div', { class: 'poll' },
    h('p', { class: 'question' }, h('strong', {}, p.question)),
    p.multiple ? h('small', { class: 'muted' }, 'More than one answer allowed') : null,
    h('ul', { class: 'options' }, p.options.map((o) => h('li', { 'data-option': o.name, 'data-count': String(o.count) },
      h('span', { class: 'name' }, o.name),
      h('progress', { max: Math.max(voters.size, 1), value: o.count, 'aria-label': o.name + ': ' + o.count + (o.count === 1 ? ' vote' : ' votes') }),
      h('span', { class: 'count', title: o.voters.map((v) => who(/^\d+$/.test(v) ? v : '', v)).join(', ') }, String(o.count))))),
    h('small', { class: 'muted' }, voters.size === 1 ? '1 person voted' : voters.size + ' people voted'));
}

function reactionsView(rs) {
  if (!rs || !rs.length) return null;
  const by = new Map();
  for (const r of rs) by.set(r.emoji, [...(by.get(r.emoji) || []), r.fromMe ? 'You' : who(r.from, r.lid)]);
  return h('div', { class: 'reactions', role: 'group', 'aria-label': 'Reactions' },
    [...by].map(([emoji, people]) => h('span', { class: 'reaction', 'data-emoji': emoji, title: people.join(', ') },
      emoji, people.length > 1 ? ' ' + people.length : '', h('span', { class: 'sr-only' }, ' from ' + people.join(', ')))));
}

function quoteView(q) {
  if (!q) return null;
  const text = q.text || (q.type ? '[' + (kindNames[q.type] || q.type) + ']' : '');
  return h('blockquote', { class: 'quote', 'data-quote': q.id },
    h('span', { class: 'who' }, q.fromMe ? 'You' : who(q.phone, q.lid)), text ? h('span', { class: 'qtext' }, text) : null);
}

export function messages(el) {
  const subs = live.subscriptions();
  const slot = h('div', { class: 'slot' });
  const list = h('ol', { class: 'msgs', id: 'msg-list', 'aria-live': 'polite', 'aria-label': 'Messages, newest first' });
  const more = h('div', {});
  const direction = h('select', { name: 'direction', id: 'msg-direction' },
    h('option', { value: '' }, 'Sent and received'), h('option', { value: 'out' }, 'Sent'), h('option', { value: 'in' }, 'Received'));
  const status = h('select', { name: 'status', id: 'msg-status' }, h('option', { value: '' }, 'Any'),
    ['queued', 'sent', 'delivered', 'read', 'failed', 'cancelled'].map((s) => h('option', { value: s }, badge(s).textContent)));
  const phone = h('input', { name: 'phone', id: 'msg-phone', inputmode: 'tel', placeholder: '4915112345678', size: 16 });
  let next = '';
  let gen = 0;
  const shown = new Map(); // key (direction + id) → li
  // Group names, read once when a group's message shows (the network is asked, not the store).
  let groupNames = null;
  const groupName = (id) => (groupNames && groupNames.get(id)) || 'a group';
  const learnGroups = () => {
    if (groupNames) return;
    groupNames = new Map();
    api('GET', '/api/client/groups').then((r) => {
      for (const g of r.groups || []) groupNames.set(g.id, g.name);
      for (const li of shown.values()) if (li._m && li._m.group) fill(li, li._m);
    }, () => { /* unnamed groups stay "a group" */ });
  };

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
  const find = (id) => shown.get('out:' + id) || shown.get('in:' + id);
  // update changes a shown message's fields (an event about it) and draws it again.
  const update = (id, fn) => {
    const li = find(id);
    if (li && li._m) fill(li, fn(li._m));
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
    li.dataset.kind = kindOf(m);
    li.toggleAttribute('data-revoked', !!m.revoked);
    li.toggleAttribute('data-edited', !!m.edited);
    li._m = m;
    if (m.group) learnGroups();
    const peer = m.group || (out ? m.to : m.from);
    const title = out ? (m.group ? 'To ' + groupName(m.group) : 'To ' + who(m.to || m.phone, m.lid)) :
      'From ' + who(m.from || m.phone, m.lid) + (m.group ? ' in ' + groupName(m.group) : '');
    const poll = m.revoked ? null : pollOf(m);
    const text = m.revoked ? h('em', { class: 'muted' }, 'This message was deleted') : content(m);
    // A message the network has: one may reply to it and react to it.
    const reachable = !m.revoked && peer && (!out || ['sent', 'delivered', 'read'].includes(m.status));
    // What a Reply or React button opened stays open (and keeps what was typed) as events
    // draw the message again.
    const act = li._act || (li._act = h('div', { class: 'act-slot' }));
    if (!reachable) close(act);
    mount(li,
      h('div', { class: 'meta' },
        h('strong', {}, title),
        m.name && !out ? h('span', {}, m.name) : null,
        h('span', {}, when(out ? m.created_at : m.timestamp)),
        out ? badge(m.status, m.status === 'queued' && m.code === 'waiting_for_contact' ? 'Waiting for the contact to write' : undefined) : badge('received'),
        out ? viaView(m) : null,
        m.edited && !m.revoked ? h('span', { class: 'edited', title: m.editedAt ? 'Edited ' + when(m.editedAt) : '' }, 'Edited') : null),
      m.revoked ? null : quoteView(m.quoted),
      text ? h('div', { class: 'text' }, text) : poll ? null : h('div', { class: 'text' }, h('span', { class: 'muted' }, '…')),
      poll ? pollView(poll) : null,
      m.revoked ? null : reactionsView(m.reactions),
      out && m.status === 'failed' ? h('div', { class: 'why' }, m.error || m.code || '') : null,
      reachable ? h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'small ghost', 'data-reply': peer, 'aria-expanded': String(act.dataset.open === 'reply'), onclick: (e) => replyForm(act, m, peer, e.currentTarget) }, 'Reply'),
        h('button', { type: 'button', class: 'small ghost', 'data-react': m.id, 'aria-expanded': String(act.dataset.open === 'react'), onclick: (e) => reactPicker(act, m, e.currentTarget) }, 'React')) : null,
      act);
  };
  // close empties what a Reply or React button opened; toggle opens it, or closes it when it
  // is already open.
  const close = (box) => {
    box.replaceChildren();
    delete box.dataset.open;
    const li = box.closest('li');
    if (li) li.querySelectorAll('.actions button').forEach((b) => b.setAttribute('aria-expanded', 'false'));
  };
  const toggle = (box, button, kind, build) => {
    const open = box.dataset.open === kind;
    close(box);
    if (open) return false;
    box.dataset.open = kind;
    button.setAttribute('aria-expanded', 'true');
    build();
    return true;
  };
  const replyForm = (box, m, peer, button) => toggle(box, button, 'reply', () => {
    const text = h('textarea', { name: 'text', rows: 2, required: true });
    const out = h('div', {});
    const to = isGroup(peer) ? 'Reply in ' + groupName(peer) : 'Reply to +' + peer;
    mount(box, form({ class: 'reply' }, [field(to, text), h('button', { type: 'submit' }, 'Send reply'), out], async () => {
      try {
        await api('POST', '/api/client/send', { phone: peer, type: 'text', text: text.value, replyTo: m.id });
        close(box);
      } catch (e) { mount(out, notice('error', sentence(e))); }
    }));
    text.focus();
  });
  const reactPicker = (box, m, button) => toggle(box, button, 'react', () => {
    const out = h('div', {});
    const mine = (m.reactions || []).find((r) => r.fromMe);
    const send = async (emoji) => {
      try {
        await api('POST', '/api/client/send', { type: 'reaction', messageId: m.id, emoji });
        close(box);
      } catch (e) { mount(out, notice('error', sentence(e))); }
    };
    mount(box, h('div', { class: 'picker', role: 'group', 'aria-label': 'React with' },
      emojis.map((e) => h('button', { type: 'button', class: 'small ghost emoji', 'data-emoji': e, 'aria-label': 'React with ' + e, 'aria-pressed': String(!!mine && mine.emoji === e), onclick: () => send(e) }, e)),
      mine ? h('button', { type: 'button', class: 'small ghost', 'data-emoji': '', onclick: () => send('') }, 'Take my reaction back') : null), out);
    box.querySelector('button').focus();
  });
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
      if (d.via) { m.via = d.via; m.viaReason = d.viaReason; }
      if (d.status !== 'queued' && m.code === 'waiting_for_contact') m.code = '';
      fill(li, m);
      return;
    }
    if (about.has(d.type)) return; // shown on the message it is about, by its own event
    if (!matches('out', d.status, d.phone || d.to)) return;
    put({ direction: 'out', id: d.messageId, message_id: d.messageId, to: d.to, group: d.group, session: d.session, status: d.status, created_at: d.at, type: d.type || 'text', text: '', via: d.via, viaReason: d.viaReason, code: d.code }, true);
    showEmpty();
    refillSoon();
  });
  subs.on('message.received', (d) => {
    if (!matches('in', '', d.from)) return;
    put({ direction: 'in', ...d }, true);
    showEmpty();
  });
  subs.on('message.reaction', (d) => update(d.messageId, (m) => ({ ...m, reactions: react(m.reactions, d) })));
  subs.on('message.edited', (d) => update(d.messageId, (m) => ({ ...m, text: d.text, edited: true, editedAt: d.at })));
  subs.on('message.revoked', (d) => update(d.messageId, (m) => ({ ...m, revoked: true, revokedAt: d.at })));
  subs.on('poll.vote', (d) => update(d.messageId, (m) => {
    const p = pollOf(m);
    return p ? { ...m, poll: vote(p, d.voter, d.options || []) } : m;
  }));
  subs.on('resync', () => load(false));

  for (const c of [direction, status]) c.addEventListener('change', () => load(false));
  phone.addEventListener('change', () => load(false));
  mount(el,
    h('section', { class: 'card' },
      h('form', { class: 'filters', id: 'msg-filters', onsubmit: (e) => { e.preventDefault(); load(false); } },
        field('Show', direction), field('Status of sent ones', status), field('Phone number', phone),
        h('div', { class: 'field' }, h('button', { type: 'submit', class: 'ghost' }, 'Filter'))),
      h('p', { class: 'muted' }, 'Statuses, reactions, edits and poll votes change here as they happen.')),
    h('section', { class: 'card' }, slot, list, more));
  load(false);
  return () => { subs.stop(); clearTimeout(refill); };
}

function isGroup(id) {
  return /@g\.us$/.test(id || '');
}

function rank(s) {
  return { queued: 0, sent: 1, delivered: 2, read: 3, failed: 4, cancelled: 4 }[s] ?? -1;
}
