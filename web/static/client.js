// client.js: the client screens: the phone's link (QR, pair code, status), send, API keys and
// usage. Each renders into el and returns its cleanup.
import { h, mount, api, poll, when, say, field, form, table, badge, copyButton, sentence, notice, unavailable } from './lib.js';
import * as live from './live.js';

const statusWords = {
  CONNECTED: 'Your phone is linked: messages go out from it.',
  SCAN_QR: 'Open WhatsApp on your phone, go to Linked devices → Link a device, and scan the code below.',
  DISCONNECTED: 'The link to your phone dropped for a moment; the gateway reconnects by itself. If it stays like this, link again.',
  NOT_CREATED: 'No phone is linked yet: scan the code below with it.',
  LOGGED_OUT: 'The phone unlinked this gateway. Link it again with a new code.',
};

/**
 * session: the phone's link: its status in words (live, from session.status events), the QR
 * code that refreshes until the phone is linked, and the pair code for a phone that cannot scan.
 */
export function session(el) {
  const statusEl = h('div', { class: 'status-line' });
  const extra = h('div', {});
  const qrBox = h('div', { class: 'qr-box' });
  const slot = h('div', { class: 'slot' });
  const pairOut = h('div', {});
  const subs = live.subscriptions();
  let status = null;
  let warning = '';
  let qrPoll = null;
  let lastQR = '';
  let stopped = false;

  const phone = h('input', { name: 'phone', inputmode: 'tel', placeholder: '4915112345678', required: true });
  const pairForm = form({ id: 'pair-form' }, [field('Phone number (with country code)', phone),
    h('button', { type: 'submit' }, 'Get a pair code')], async () => {
    try {
      const r = await api('POST', '/api/client/pair-code', { phone: phone.value });
      mount(pairOut, h('p', {}, 'On the phone: Linked devices → Link with phone number, then type ', h('code', { class: 'paircode', id: 'pair-code' }, r.code), '.'));
      say(slot, '', '');
    } catch (e) { say(slot, 'error', sentence(e)); }
  });

  const waiting = (st) => !st || st.status === 'SCAN_QR' || st.status === 'NOT_CREATED';
  const stopQR = () => { if (qrPoll) { qrPoll.stop(); qrPoll = null; } };
  // The QR code is asked for only while the phone is not linked, and refreshes every 3 s (the
  // network replaces it about every 20 s).
  const startQR = () => {
    if (qrPoll || stopped) return;
    qrPoll = poll(async () => {
      try {
        const r = await api('GET', '/api/client/qr');
        if (!qrPoll || !waiting(status)) return; // answered too late
        if (r.qr !== lastQR) {
          lastQR = r.qr;
          mount(qrBox, h('img', { id: 'qr', src: r.qr, alt: 'QR code to scan with the phone', width: 256, height: 256 }),
            h('p', { class: 'muted' }, 'The code refreshes by itself until the phone is linked.'));
        }
      } catch (e) {
        if (e.code === 'already_connected') { stopQR(); load(); return; }
        mount(qrBox, notice('error', sentence(e)));
      }
    }, 3000);
  };

  const render = (st) => {
    const changed = !status || status.status !== st.status;
    status = st;
    mount(statusEl, h('span', { id: 'session-status', 'data-status': st.status }, badge(st.status)),
      st.phone ? h('span', { class: 'phone' }, '+' + st.phone) : null,
      h('p', {}, statusWords[st.status] || ''));
    const bits = [];
    if (st.statusReason) bits.push(h('p', {}, 'Why: ', h('strong', {}, st.statusReason), st.until ? ' (until ' + when(st.until) + ')' : ''));
    if (st.restrictedUntil && new Date(st.restrictedUntil) > new Date()) bits.push(notice('warn',
      'The network limits this phone until ' + when(st.restrictedUntil) + ': first messages to new numbers wait until then; customers who wrote to you still get theirs.'));
    if (warning) bits.push(notice('warn', warning));
    if (st.status === 'CONNECTED' && st.queue) bits.push(h('p', { id: 'queue' }, st.queue.depth ? [h('strong', {}, String(st.queue.depth)),
      ' message(s) waiting to go out', st.queue.oldestAt ? ', the oldest since ' + when(st.queue.oldestAt) : '', '.'] : 'Nothing is waiting to go out.'));
    mount(extra, bits);
    if (!changed) return;
    if (waiting(st)) startQR();
    else { stopQR(); lastQR = ''; if (qrBox.querySelector('#qr')) qrBox.replaceChildren(); }
    pairCard.hidden = st.status === 'CONNECTED';
    if (st.status === 'CONNECTED') mount(qrBox, h('p', { class: 'linked' }, '✓ Linked'), h('p', { class: 'muted' }, 'Send from the Send page, start a campaign, or use an API key.'));
    if (st.status === 'DISCONNECTED' || st.status === 'LOGGED_OUT') mount(qrBox, h('button', { type: 'button', onclick: async () => {
      try { await api('POST', '/api/client/start'); status = null; load(); } catch (e) { say(slot, 'error', sentence(e)); }
    } }, 'Link again with a new QR code'));
  };
  const load = async () => {
    try { const st = await api('GET', '/api/client/status'); if (!stopped) { render(st); say(slot, '', ''); } }
    catch (e) { say(slot, 'error', sentence(e)); }
  };

  const pairCard = h('section', { class: 'card' }, h('h2', {}, 'Or link with a code'), h('p', { class: 'muted' }, 'For a phone that cannot scan: the gateway gives a code to type on it.'), pairForm, pairOut);
  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'Status'), statusEl, extra, slot),
    h('div', { class: 'cols' }, h('section', { class: 'card' }, h('h2', {}, 'Phone'), qrBox), pairCard));
  // The status first (one round trip): a linked phone never asks for a QR code it cannot have.
  load();
  // Then the events say when it changes; the queue is read again with each change.
  subs.on('session.status', load);
  subs.on('session.warning', (d) => {
    warning = 'The gateway slowed this phone to half its pace' + (d.until ? ' until ' + when(d.until) : '') + (d.reason ? ' (' + d.reason + ')' : '') + ', to keep it in the network’s good books.';
    if (status) render(status);
  });
  subs.on('resync', load);
  subs.on('message.status', () => { if (status && status.status === 'CONNECTED') load(); });
  return () => { stopped = true; subs.stop(); stopQR(); };
}

// Each kind's fields (DESIGN.md section 16), as POST /api/client/send takes them.
const kinds = {
  text: ['text'],
  image: ['fileUrl', 'fileName', 'caption'],
  video: ['fileUrl', 'fileName', 'caption'],
  audio: ['fileUrl', 'fileName', 'ptt'],
  document: ['fileUrl', 'fileName', 'caption'],
  sticker: ['fileUrl'],
  location: ['lat', 'lng', 'name', 'address'],
  contact: ['contactName', 'contactPhone'],
  poll: ['question', 'options', 'multiple'],
  reaction: ['messageId', 'emoji'],
};
const kindLabels = {
  text: 'Text', image: 'Photo', video: 'Video', audio: 'Audio or voice note', document: 'Document', sticker: 'Sticker (WebP)',
  location: 'Location', contact: 'Contact card', poll: 'Poll', reaction: 'Reaction to a message',
};
const labels = {
  text: 'Message', fileUrl: 'File URL (https:// or a data: URI)', fileName: 'File name', caption: 'Caption',
  lat: 'Latitude', lng: 'Longitude', name: 'Place name', address: 'Address', contactName: 'Contact name', contactPhone: 'Contact phone',
  question: 'Question', options: 'Answers, one per line (2 to 12)', multiple: 'More than one answer allowed', ptt: 'Send as a voice note',
  messageId: 'Message id (a Messages line’s React button does this for you)', emoji: 'Emoji (left empty, it takes your reaction back)',
  replyTo: 'Reply to message id (optional)', typing: 'Show “typing…” first',
};
const checks = new Set(['ptt', 'multiple', 'typing']);

/**
 * send: every message kind from the dashboard (DESIGN.md section 16): to a number or one of the
 * phone's groups, as a reply to a message, with "typing…" first.
 */
export function send(el) {
  const slot = h('div', { class: 'slot' });
  const phone = h('input', { name: 'phone', id: 'send-phone', inputmode: 'tel', placeholder: '4915112345678', required: true });
  const group = h('select', { name: 'group', id: 'send-group' }, h('option', { value: '' }, 'None: the number above'));
  const groupHint = h('small', {}, 'Loading the phone’s groups…');
  const type = h('select', { name: 'type', id: 'send-type' }, Object.keys(kinds).map((k) => h('option', { value: k }, kindLabels[k])));
  const inputs = {};
  for (const k of Object.keys(labels)) {
    if (checks.has(k)) inputs[k] = h('input', { name: k, type: 'checkbox' });
    else if (k === 'text' || k === 'options') inputs[k] = h('textarea', { name: k, rows: 4 });
    else inputs[k] = h('input', { name: k, type: k === 'lat' || k === 'lng' ? 'number' : 'text', step: 'any' });
  }
  const input = (k) => (checks.has(k) ? h('label', { class: 'check field' }, inputs[k], labels[k]) : field(labels[k], inputs[k]));
  const fields = h('div', {});
  // The recipient: a number, or a group picked (then the number is not asked); a reaction's
  // recipient is its message's.
  const showTo = () => {
    phone.disabled = !!group.value;
    phone.required = !group.value && type.value !== 'reaction';
  };
  const showFields = () => {
    const own = kinds[type.value];
    const common = type.value === 'reaction' ? [] : ['replyTo', 'typing'];
    mount(fields, [...own, ...common].map(input));
    showTo();
  };
  type.addEventListener('change', showFields);
  group.addEventListener('change', showTo);
  showFields();
  api('GET', '/api/client/groups').then((r) => {
    const gs = r.groups || [];
    for (const g of gs) group.append(h('option', { value: g.id }, g.name + ' (' + g.participants.length + (g.participants.length === 1 ? ' member)' : ' members)')));
    groupHint.textContent = gs.length ? 'A group’s message counts once, however many members it has.' : 'The phone is in no group.';
  }, () => { groupHint.textContent = 'The phone’s groups show once it is linked.'; });

  mount(el, h('section', { class: 'card narrow' },
    form({ id: 'send-form' }, [field('To (with country code)', phone), field('Or to a group', group, groupHint), field('Kind', type), fields,
      h('button', { type: 'submit' }, 'Send')], async () => {
      const body = { type: type.value };
      const to = group.value || phone.value.trim();
      if (to) body.phone = to;
      for (const k of [...kinds[type.value], 'replyTo', 'typing']) {
        if (type.value === 'reaction' && (k === 'replyTo' || k === 'typing')) continue;
        if (checks.has(k)) { if (inputs[k].checked) body[k] = true; continue; }
        const v = inputs[k].value.trim();
        if (k === 'options') body.options = v.split('\n').map((o) => o.trim()).filter(Boolean);
        else if (k === 'emoji') body.emoji = v;
        else if (v !== '') body[k] = k === 'lat' || k === 'lng' ? Number(v) : v;
      }
      say(slot, 'info', 'Sending…');
      try {
        const r = await api('POST', '/api/client/send', body);
        const dest = group.value ? group.selectedOptions[0].textContent.replace(/ \(\d+ members?\)$/, '') : '+' + (r.phone || r.to || phone.value.replace(/\D/g, ''));
        const id = r.message_id ? ' (message ' + r.message_id + ')' : '';
        const follow = [' ', h('a', { href: '#/messages' }, 'Follow it in Messages'), '.'];
        if (r.status === 'queued') mount(slot, h('p', { class: 'notice info', role: 'status' }, 'Queued for ' + dest + id + ': it goes out as soon as the phone is reachable.', follow));
        else mount(slot, h('p', { class: 'notice ok', role: 'status' }, 'Sent to ' + dest + id + '.', follow));
      } catch (e) { say(slot, 'error', sentence(e)); }
    }), slot));
}

/** keys: the caller's API keys, masked (only an admin creates keys, and sees the raw key once). */
export function keys(el) {
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  mount(el, h('section', { class: 'card' }, h('p', { class: 'muted' },
    'Programs send with these keys (Authorization: Bearer <key>). An administrator issues them; the full key was shown once, when it was created.'), box));
  api('GET', '/api/client/apikeys').then((list) => mount(box, table([
    { title: 'Name', cell: (k) => k.name },
    { title: 'Key', cell: (k) => h('code', {}, k.maskedKey) },
    { title: 'Status', cell: (k) => badge(k.status) },
    { title: 'Scopes', cell: (k) => (k.scopes || []).join(', ') },
    { title: 'Plan', cell: (k) => k.plan },
    { title: 'Calls today', cell: (k) => k.api_calls + (k.rate_limit ? ' / ' + k.rate_limit : '') },
    { title: 'Created', cell: (k) => when(k.createdAt) },
    { title: 'Expires', cell: (k) => (k.expiresAt ? when(k.expiresAt) : 'never') },
  ], list, 'You have no API key yet. Ask an administrator for one.')), (e) => mount(box, notice('error', sentence(e))));
}

/** meter is a count against its limit, as a bar and in words. */
export function meter(used, limit) {
  if (!limit) return h('span', {}, String(used), ' (no cap)');
  const pct = Math.min(100, Math.round((used / limit) * 100));
  return h('span', { class: 'meter' }, h('progress', { max: limit, value: used, 'aria-label': used + ' of ' + limit }), ` ${used} of ${limit} (${pct}%)`);
}

/** usage: each key's calls today against its daily cap, and the month's message allowance. */
export function usage(el) {
  const daily = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const monthly = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'Daily calls (UTC day)'), daily),
    h('section', { class: 'card' }, h('h2', {}, "This month's allowance"), monthly));
  api('GET', '/api/client/apikeys').then((list) => mount(daily, table([
    { title: 'Key', cell: (k) => k.name + ' ' + k.maskedKey },
    { title: 'Plan', cell: (k) => k.plan },
    { title: 'Calls', cell: (k) => meter(k.api_calls, k.rate_limit) },
  ], list, 'No API key yet: the daily count is per key.')), (e) => mount(daily, notice('error', sentence(e))));
  api('GET', '/api/client/usage').then((u) => mount(monthly,
    h('p', {}, 'Plan ', h('strong', { id: 'usage-plan' }, u.plan || '—')),
    h('p', { id: 'usage-month' }, 'Messages sent: ', meter(u.messagesSent, u.monthlyLimit)),
    u.remaining != null ? h('p', {}, String(u.remaining), ' left this month.') : null,
    h('p', { class: 'muted' }, 'The allowance starts again on ' + when(u.resetsAt) + '. Only messages the network accepted count.')),
  (e) => mount(monthly, e.status === 404 ? unavailable("The month's allowance") : notice('error', sentence(e))));
}

/**
 * showOnce shows a secret (API key, signing secret) once, with a copy button. Dismissing it
 * removes it from the page; nothing else keeps it.
 */
export function showOnce(box, title, secret, hint) {
  let value = secret;
  const dismiss = () => { value = ''; box.replaceChildren(); };
  mount(box, h('div', { class: 'once', role: 'alert' },
    h('h3', {}, title),
    h('code', { class: 'secret', id: 'secret-once' }, secret),
    h('p', {}, hint),
    h('div', { class: 'row' }, copyButton(() => value), h('button', { type: 'button', id: 'secret-dismiss', onclick: dismiss }, 'I have stored it'))));
  return dismiss;
}
