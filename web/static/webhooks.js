// webhooks.js: webhook subscriptions (the signing secret shown once), a test event, the recent
// deliveries with the webhook-id the receiver sees, and redelivery of an event.
import { h, mount, api, poll, when, say, field, form, table, badge, sentence, notice, unavailable, confirmInline } from './lib.js';
import { showOnce } from './client.js';

const eventTypes = [
  ['message.status', 'A message’s status changes'],
  ['message.received', 'A customer writes'],
  ['session.status', 'The phone’s link changes'],
  ['session.warning', 'The network warns about the phone'],
  ['campaign.progress', 'A campaign progresses'],
  ['campaign.completed', 'A campaign ends'],
  ['store.event', 'A store order event is handled'],
];

// Transport errors in words: what a shop owner can act on.
function why(d) {
  const e = d.error || '';
  if (!e) return d.statusCode ? 'The receiver answered ' + d.statusCode + '.' : '';
  if (/closed connection|connection reset|EOF/i.test(e)) return 'The receiver closed the connection.';
  if (/timeout|no answer within/i.test(e)) return 'The receiver did not answer in time.';
  if (/refused/i.test(e)) return 'Nothing answers at that address.';
  if (/no such host|lookup/i.test(e)) return 'That address’s host name does not resolve.';
  if (/certificate|x509|tls/i.test(e)) return 'The receiver’s HTTPS certificate was refused.';
  return e;
}

export function webhooks(el) {
  const slot = h('div', { class: 'slot' });
  const secretBox = h('div', {});
  const list = h('div', { id: 'webhook-list' }, h('p', { class: 'muted' }, 'Loading…'));
  const deliveries = h('div', { id: 'webhook-deliveries' });
  const url = h('input', { name: 'url', type: 'url', placeholder: 'https://example.com/hooks/gateway', required: true });
  // The body's format: the gateway's own, or Meta's Cloud API webhooks (for Chatwoot and other
  // Cloud API integrations, README "Integrations"), signed X-Hub-Signature-256 as well.
  const format = h('select', { name: 'format', id: 'webhook-format' },
    h('option', { value: 'standard' }, 'Gateway events (Standard Webhooks)'),
    h('option', { value: 'meta' }, "Meta's Cloud API webhooks (messages and statuses)"));
  const boxes = eventTypes.map(([t, label]) => h('label', { class: 'check' }, h('input', { type: 'checkbox', value: t, checked: true }), label));
  let watching = null;
  const load = async () => {
    try {
      const r = await api('GET', '/api/client/webhooks');
      const subs = Array.isArray(r) ? r : r.webhooks || r.subscriptions || [];
      mount(list, table([
        { title: 'Address', cell: (s) => h('code', {}, s.url) },
        { title: 'Events', cell: (s) => (s.events || []).join(', ') + (s.format === 'meta' ? " (Meta's format)" : '') },
        { title: 'Status', cell: (s) => [badge(s.status || (s.disabled ? 'disabled' : 'active')), s.disabledReason ? ' ' + s.disabledReason : ''] },
        { title: '', label: 'Actions', cell: (s) => h('div', { class: 'row' },
          h('button', { type: 'button', class: 'small', 'data-test-webhook': s.id, onclick: () => sendTest(s) }, 'Send a test event'),
          h('button', { type: 'button', class: 'small ghost', onclick: () => showDeliveries(s) }, 'Deliveries'),
          h('button', { type: 'button', class: 'small danger', onclick: () => confirmInline(slot, 'Delete the subscription to ' + s.url + '?', 'Delete', async () => {
            try { await api('DELETE', '/api/client/webhooks?id=' + encodeURIComponent(s.id)); load(); } catch (e) { say(slot, 'error', sentence(e)); }
          }) }, 'Delete')) },
      ], subs, 'No subscription yet: add the address of a program that should hear about messages.'));
      return true;
    } catch (e) {
      if (e.status === 404) { mount(el, h('section', { class: 'card' }, unavailable('Webhooks'))); return false; }
      mount(list, notice('error', sentence(e)));
      return true;
    }
  };
  // After a test or a redelivery the list is read again for a while: the attempt comes once
  // the subscription's deliverer has posted it.
  const follow = (s) => {
    if (watching) watching.stop();
    let n = 0;
    watching = poll(async () => { if (++n > 10) { watching.stop(); return; } await showDeliveries(s); }, 1000);
  };
  const sendTest = async (s) => {
    try {
      const r = await api('POST', '/api/client/webhooks/test?id=' + encodeURIComponent(s.id));
      say(slot, 'ok', 'A test event is on its way to ' + s.url + ' (webhook-id ' + r.id + ').');
      follow(s);
    } catch (e) { say(slot, 'error', sentence(e)); }
  };
  const redeliver = async (s, d) => {
    try {
      await api('POST', '/api/client/webhooks/redeliver', { id: s.id, eventId: d.eventId });
      say(slot, 'ok', 'The event is sent again to ' + s.url + '.');
      follow(s);
    } catch (e) { say(slot, 'error', sentence(e)); }
  };
  const showDeliveries = async (s) => {
    try {
      const r = await api('GET', '/api/client/webhooks/deliveries?id=' + encodeURIComponent(s.id));
      const rows = Array.isArray(r) ? r : r.deliveries || [];
      mount(deliveries, h('section', { class: 'card' },
        h('div', { class: 'spread' }, h('h2', {}, 'Recent deliveries to ' + s.url),
          h('button', { type: 'button', class: 'small ghost', onclick: () => { if (watching) watching.stop(); deliveries.replaceChildren(); } }, 'Close')),
        table([
          { title: 'At', cell: (d) => when(d.at) },
          { title: 'Event', cell: (d) => d.type },
          { title: 'webhook-id', cell: (d) => h('code', {}, d.id) },
          { title: 'Try', cell: (d) => String(d.attempt || 1) },
          { title: 'Outcome', cell: (d) => [badge(d.delivered ? 'delivered' : 'failed'), ' ', why(d)] },
          { title: '', label: 'Actions', cell: (d) => h('button', { type: 'button', class: 'small ghost', 'data-redeliver': d.eventId, onclick: () => redeliver(s, d) }, 'Send again') },
        ], rows, 'Nothing delivered yet.', (d) => ({ 'data-event': d.eventId, 'data-type': d.type }))));
    } catch (e) { say(slot, 'error', sentence(e)); }
  };
  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'New subscription'),
      h('p', { class: 'muted' }, 'The gateway posts each event to this address, signed (Standard Webhooks), and tries again for 24 hours until it answers 2xx.'),
      form({ id: 'webhook-form' }, [field('Address', url), field('Format', format), h('fieldset', {}, h('legend', {}, 'Events'), boxes), h('button', { type: 'submit' }, 'Subscribe')], async () => {
        const events = boxes.map((b) => b.firstChild).filter((i) => i.checked).map((i) => i.value);
        try {
          const r = await api('POST', '/api/client/webhooks', { url: url.value.trim(), events, format: format.value });
          url.value = '';
          showOnce(secretBox, 'Signing secret', r.secret, r.format === 'meta'
            ? 'Use it as the app secret: each delivery carries X-Hub-Signature-256 keyed with it. It is shown this once.'
            : 'Verify each delivery with it (Standard Webhooks). It is shown this once.');
          load();
        } catch (e) { say(slot, 'error', sentence(e)); }
      }), secretBox),
    h('section', { class: 'card' }, h('h2', {}, 'Subscriptions'), slot, list),
    deliveries);
  load();
  return () => { if (watching) watching.stop(); };
}
