// client.js: the client screens: session (QR, pair code, status), send, API keys, usage,
// campaigns and webhooks. Each renders into el and returns its cleanup.
import { h, mount, api, poll, when, say, field, form, table, badge, copyButton, sentence, notice, unavailable } from './lib.js';

const statusWords = {
  CONNECTED: 'Your phone is linked: messages go out from it.',
  SCAN_QR: 'Scan the QR code with the messaging app on your phone (Linked devices → Link a device).',
  DISCONNECTED: 'The link to your phone dropped; the gateway reconnects by itself. If it stays like this, link again.',
  NOT_CREATED: 'No phone is linked yet.',
};

/** session: the live status, the QR code that refreshes until the session connects, pair code. */
export function session(el) {
  const statusEl = h('div', { class: 'status-line' });
  const extra = h('div', {});
  const qrBox = h('div', { class: 'qr-box' });
  const slot = h('div', { class: 'slot' });
  const pairOut = h('div', {});
  let status = null;
  let qrPoll = null;
  let lastQR = '';

  const phone = h('input', { name: 'phone', inputmode: 'tel', placeholder: '4915112345678', required: true });
  const pairForm = form({ id: 'pair-form' }, [field('Phone number (with country code)', phone),
    h('button', { type: 'submit' }, 'Get a pair code')], async () => {
    try {
      const r = await api('POST', '/api/client/pair-code', { phone: phone.value });
      mount(pairOut, h('p', {}, 'On the phone: Linked devices → Link with phone number, then type ', h('code', { class: 'paircode', id: 'pair-code' }, r.code), '.'));
      say(slot, '', '');
    } catch (e) { say(slot, 'error', sentence(e)); }
  });

  const stopQR = () => { if (qrPoll) { qrPoll.stop(); qrPoll = null; } };
  const startQR = () => {
    if (qrPoll) return;
    qrPoll = poll(async () => {
      try {
        const r = await api('GET', '/api/client/qr');
        if (!qrPoll || (status && status.status !== 'SCAN_QR' && status.status !== 'NOT_CREATED')) return; // answered too late
        if (r.qr !== lastQR) {
          lastQR = r.qr;
          mount(qrBox, h('img', { id: 'qr', src: r.qr, alt: 'QR code to scan with the phone', width: 256, height: 256 }),
            h('p', { class: 'muted' }, 'The code refreshes by itself until the phone is linked.'));
        }
      } catch (e) {
        if (e.code === 'already_connected') { stopQR(); return; }
        mount(qrBox, notice('error', sentence(e)));
      }
    }, 3000);
  };

  const render = (st) => {
    const changed = !status || status.status !== st.status;
    status = st;
    mount(statusEl, h('span', { id: 'session-status' }, badge(st.status)),
      st.phone ? h('span', { class: 'phone' }, '+' + st.phone) : null,
      h('p', {}, statusWords[st.status] || st.status));
    const bits = [];
    if (st.statusReason) bits.push(h('p', {}, 'Reason: ', h('strong', {}, st.statusReason), st.until ? ' (until ' + when(st.until) + ')' : ''));
    if (st.queue) bits.push(h('p', { id: 'queue' }, 'Queue: ', h('strong', {}, String(st.queue.depth || 0)), ' waiting',
      st.queue.oldestAt ? ', oldest since ' + when(st.queue.oldestAt) : ''));
    mount(extra, bits);
    if (!changed) return;
    if (st.status === 'SCAN_QR' || st.status === 'NOT_CREATED') startQR();
    else { stopQR(); lastQR = ''; if (qrBox.querySelector('#qr')) qrBox.replaceChildren(); }
    pairCard.hidden = st.status === 'CONNECTED';
    if (st.status === 'CONNECTED') mount(qrBox, h('p', { class: 'linked' }, '✓ Linked'), h('p', { class: 'muted' }, 'Send from the Send page, or with an API key.'));
    if (st.status === 'DISCONNECTED') mount(qrBox, h('button', { type: 'button', onclick: async () => {
      try { await api('POST', '/api/client/start'); status = null; } catch (e) { say(slot, 'error', sentence(e)); }
    } }, 'Link again with a new QR code'));
  };

  const pairCard = h('section', { class: 'card' }, h('h2', {}, 'Or link with a code'), h('p', { class: 'muted' }, 'For a phone that cannot scan: the gateway gives a code to type on it.'), pairForm, pairOut);
  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'Status'), statusEl, extra, slot),
    h('div', { class: 'cols' }, h('section', { class: 'card' }, h('h2', {}, 'Phone'), qrBox), pairCard));
  // The QR code is asked for at once, beside the status: a new user sees it a round trip sooner.
  startQR();
  const statusPoll = poll(async () => {
    try { render(await api('GET', '/api/client/status')); say(slot, '', ''); }
    catch (e) { say(slot, 'error', sentence(e)); }
  }, () => (status && status.status === 'CONNECTED' ? 5000 : 1000));

  return () => { statusPoll.stop(); stopQR(); };
}

const kinds = {
  text: ['text'],
  image: ['fileUrl', 'fileName', 'caption'],
  video: ['fileUrl', 'fileName', 'caption'],
  audio: ['fileUrl', 'fileName'],
  document: ['fileUrl', 'fileName', 'caption'],
  location: ['lat', 'lng', 'address'],
  contact: ['contactName', 'contactPhone'],
};
const labels = {
  text: 'Message', fileUrl: 'File URL (https:// or a data: URI)', fileName: 'File name', caption: 'Caption',
  lat: 'Latitude', lng: 'Longitude', address: 'Address or title', contactName: 'Contact name', contactPhone: 'Contact phone',
};

/** send: every message kind of SPEC 4.4 from the dashboard. */
export function send(el) {
  const slot = h('div', { class: 'slot' });
  const phone = h('input', { name: 'phone', inputmode: 'tel', placeholder: '4915112345678', required: true });
  const type = h('select', { name: 'type' }, Object.keys(kinds).map((k) => h('option', { value: k }, k)));
  const inputs = {};
  for (const k of Object.keys(labels)) {
    inputs[k] = k === 'text' ? h('textarea', { name: k, rows: 4 }) :
      h('input', { name: k, type: k === 'lat' || k === 'lng' ? 'number' : 'text', step: 'any' });
  }
  const fields = h('div', {});
  const showFields = () => mount(fields, kinds[type.value].map((k) => field(labels[k], inputs[k])));
  type.addEventListener('change', showFields);
  showFields();
  mount(el, h('section', { class: 'card narrow' },
    form({ id: 'send-form' }, [field('To (with country code)', phone), field('Kind', type), fields, h('button', { type: 'submit' }, 'Send')], async () => {
      const body = { phone: phone.value, type: type.value };
      for (const k of kinds[type.value]) {
        const v = inputs[k].value.trim();
        if (v === '') continue;
        body[k] = k === 'lat' || k === 'lng' ? Number(v) : v;
      }
      say(slot, 'info', 'Sending…');
      try {
        const r = await api('POST', '/api/client/send', body);
        const to = '+' + (r.to || phone.value.replace(/\D/g, '')), id = r.message_id ? ' (message ' + r.message_id + ')' : '';
        if (r.status === 'queued') say(slot, 'info', 'Queued for ' + to + id + ': it goes out as soon as the phone is reachable.');
        else say(slot, 'ok', 'Sent to ' + to + id + '.');
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

function meter(used, limit) {
  if (!limit) return h('span', {}, String(used), ' (no cap)');
  const pct = Math.min(100, Math.round((used / limit) * 100));
  return h('span', { class: 'meter' }, h('progress', { max: limit, value: used }), ` ${used} of ${limit} (${pct}%)`);
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

/** campaigns: bulk sends with their progress; cancel one that is running. */
export function campaigns(el) {
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  mount(el, h('section', { class: 'card' }, box));
  const load = async () => {
    try {
      const r = await api('GET', '/api/client/campaigns');
      const list = Array.isArray(r) ? r : r.campaigns || [];
      mount(box, table([
        { title: 'Campaign', cell: (c) => h('code', {}, c.campaign_id || c.id) },
        { title: 'Status', cell: (c) => badge(c.status) },
        { title: 'Progress', cell: (c) => meter(c.total_processed || 0, c.total_requested || 0) },
        { title: 'Sent / failed', cell: (c) => (c.successful || 0) + ' / ' + (c.failed || 0) },
        { title: '', cell: (c) => (c.status === 'running' || c.status === 'queued' ? h('button', { type: 'button', class: 'small danger', onclick: async () => {
          try { await api('DELETE', '/api/client/campaigns?id=' + encodeURIComponent(c.campaign_id || c.id)); } catch (e) { mount(box, notice('error', sentence(e))); }
        } }, 'Cancel') : '') },
      ], list, 'No campaign yet. Programs start them with POST /api/v1/messages/send-bulk.'));
    } catch (e) {
      if (e.status === 404) { mount(box, unavailable('The campaign list'), h('p', { class: 'muted' }, 'Meanwhile a program reads a campaign with GET /api/v1/campaigns/{id} and cancels it with DELETE.')); return 'stop'; }
      mount(box, notice('error', sentence(e)));
    }
  };
  let p = null;
  load().then((r) => { if (r !== 'stop') p = poll(load, 2000); });
  return () => p && p.stop();
}

const eventTypes = ['message.status', 'message.received', 'session.status', 'campaign.progress', 'campaign.completed', 'store.event'];

/** webhooks: subscriptions (the signing secret shown once) and their recent deliveries. */
export function webhooks(el) {
  const slot = h('div', { class: 'slot' });
  const secretBox = h('div', {});
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const deliveries = h('div', {});
  const url = h('input', { name: 'url', type: 'url', placeholder: 'https://example.com/hooks/gateway', required: true });
  const boxes = eventTypes.map((t) => h('label', { class: 'check' }, h('input', { type: 'checkbox', value: t, checked: true }), t));
  const load = async () => {
    try {
      const r = await api('GET', '/api/client/webhooks');
      const subs = Array.isArray(r) ? r : r.webhooks || r.subscriptions || [];
      mount(list, table([
        { title: 'URL', cell: (s) => s.url },
        { title: 'Events', cell: (s) => (s.events || []).join(', ') },
        { title: 'Status', cell: (s) => [badge(s.status || (s.disabled ? 'disabled' : 'active')), s.disabledReason ? ' ' + s.disabledReason : ''] },
        { title: '', cell: (s) => [
          h('button', { type: 'button', class: 'small', onclick: () => showDeliveries(s) }, 'Deliveries'), ' ',
          h('button', { type: 'button', class: 'small danger', onclick: async () => {
            if (!confirm('Delete the subscription to ' + s.url + '?')) return;
            try { await api('DELETE', '/api/client/webhooks?id=' + encodeURIComponent(s.id)); load(); } catch (e) { say(slot, 'error', sentence(e)); }
          } }, 'Delete')] },
      ], subs, 'No subscription yet.'));
      return true;
    } catch (e) {
      if (e.status === 404) { mount(el, h('section', { class: 'card' }, unavailable('Webhooks'))); return false; }
      mount(list, notice('error', sentence(e)));
      return true;
    }
  };
  const showDeliveries = async (s) => {
    try {
      const r = await api('GET', '/api/client/webhooks/deliveries?id=' + encodeURIComponent(s.id));
      const rows = Array.isArray(r) ? r : r.deliveries || [];
      mount(deliveries, h('h2', {}, 'Recent deliveries to ' + s.url), table([
        { title: 'At', cell: (d) => when(d.at) },
        { title: 'Event', cell: (d) => [d.type, ' ', h('code', {}, d.eventId || d.event_id || '')] },
        { title: 'HTTP status', cell: (d) => d.statusCode || d.status || '—' },
        { title: 'Error', cell: (d) => d.error || '' },
      ], rows, 'Nothing delivered yet.'));
    } catch (e) { say(slot, 'error', sentence(e)); }
  };
  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'New subscription'),
      form({ id: 'webhook-form' }, [field('Address', url), h('fieldset', {}, h('legend', {}, 'Events'), boxes), h('button', { type: 'submit' }, 'Subscribe')], async () => {
        const events = boxes.map((b) => b.firstChild).filter((i) => i.checked).map((i) => i.value);
        try {
          const r = await api('POST', '/api/client/webhooks', { url: url.value.trim(), events });
          url.value = '';
          showOnce(secretBox, 'Signing secret', r.secret, 'Verify each delivery with it (Standard Webhooks). It is shown this once.');
          load();
        } catch (e) { say(slot, 'error', sentence(e)); }
      }), slot, secretBox),
    h('section', { class: 'card' }, h('h2', {}, 'Subscriptions'), list),
    h('section', { class: 'card' }, deliveries));
  load();
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
