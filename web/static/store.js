// store.js: the store screens: message templates (editor with a live preview, the delay, the
// confirmation question) and the store connection (OAuth, access token, native webhooks,
// WooCommerce; webhook address; recent events; the orders' confirmations).
import { h, mount, api, when, say, field, form, table, badge, copyButton, sentence, notice } from './lib.js';

const topicNames = {
  'orders/create': 'Order placed',
  'orders/paid': 'Order paid',
  'fulfillments/create': 'Order shipped',
  'orders/cancelled': 'Order cancelled',
  'refunds/create': 'Refund processed',
  checkout_abandoned: 'Checkout abandoned',
};
// Topics that may ask the customer to confirm the order.
const confirmable = ['orders/create', 'orders/paid', 'fulfillments/create'];

// The sample order of the preview (the same one the gateway's template tests use).
const sample = {
  customerName: 'John', phone: '15555557447', address: '123 Shipping Street', orderName: '#1001', orderId: 450789469,
  total: '10.00', currency: 'USD', paymentMethod: 'visa', items: [['Soda', 1], ['Another Beer', 3]], shippingCity: 'Shippington',
  trackingNumber: '123456789', trackingUrl: 'https://shipping.xyz/track.php?num=123456789', trackingCompany: 'Bluedart',
  refundAmount: '4.50', orderStatusUrl: 'https://shop.example/status/1', storeName: 'Alice’s Shop',
  recoveryUrl: 'https://shop.example/checkouts/ab12/recover',
};

function value(name, ev) {
  const tracking = () => [ev.trackingNumber ? 'Tracking number: ' + ev.trackingNumber + (ev.trackingCompany ? ' (' + ev.trackingCompany + ')' : '') : '',
    ev.trackingUrl ? 'Track it here: ' + ev.trackingUrl : ''].filter(Boolean).join('\n');
  const table = {
    customer_name: ev.customerName, customer_phone: '+' + ev.phone, customer_address: ev.address, order_number: ev.orderName,
    order_id: String(ev.orderId), order_total: ev.total, currency: ev.currency, payment_method: ev.paymentMethod,
    items_list: ev.items.map(([t, q]) => t + ' x ' + q).join('\n'), items_count: String(ev.items.length),
    shipping_city: ev.shippingCity, tracking_number: ev.trackingNumber, tracking_url: ev.trackingUrl,
    tracking_company: ev.trackingCompany, tracking_info: tracking(), refund_amount: ev.refundAmount,
    order_status_url: ev.orderStatusUrl, store_name: ev.storeName, recovery_url: ev.recoveryUrl,
  };
  const camel = { customerName: 'customer_name', customerPhone: 'customer_phone', customerAddress: 'customer_address', orderNumber: 'order_number',
    orderId: 'order_id', totalPrice: 'order_total', paymentMethod: 'payment_method', itemsList: 'items_list', itemsCount: 'items_count',
    shippingCity: 'shipping_city', trackingNumber: 'tracking_number', trackingUrl: 'tracking_url', trackingCompany: 'tracking_company',
    trackingInfo: 'tracking_info', refundAmount: 'refund_amount', orderStatusUrl: 'order_status_url', storeName: 'store_name',
    recoveryUrl: 'recovery_url' };
  const key = camel[name] || name;
  return Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined;
}

/** render fills a template like the gateway does (ecom.Render): both placeholder forms, {{x}} too. */
export function render(tmpl, ev = sample) {
  return tmpl.replace(/\{\{(\w+)\}\}|\{(\w+)\}/g, (m, a, b) => {
    const v = value(a || b, ev);
    return v === undefined ? m : v;
  }).trim();
}

/** templates: one editor per topic, the live preview on a sample order, save and test-send. */
export function templates(el) {
  const slot = h('div', { class: 'slot' });
  mount(el, h('p', { class: 'muted' }, 'Loading…'));
  api('GET', '/api/client/templates').then((r) => {
    const list = r.templates || [];
    let current = list[0];
    const topic = h('select', { id: 'template-topic' }, list.map((t) => h('option', { value: t.topic }, (topicNames[t.topic] || t.topic) + ' (' + t.topic + ')')));
    const text = h('textarea', { id: 'template-text', rows: 9, spellcheck: 'true' });
    const enabled = h('input', { type: 'checkbox', id: 'template-enabled' });
    const preview = h('pre', { class: 'bubble', id: 'template-preview' });
    const origin = h('small', { class: 'muted' });
    // When the message goes: an order topic's delay, a checkout's after.
    const wait = h('input', { id: 'template-wait', placeholder: '0', size: 8 });
    const waitField = field('Send it after', wait, ' ');
    // The confirmation question (order topics).
    const c = {
      on: h('input', { type: 'checkbox', id: 'confirm-on' }),
      question: h('input', { id: 'confirm-question' }),
      yes: h('input', { id: 'confirm-yes' }), no: h('input', { id: 'confirm-no' }),
      follow: h('input', { id: 'confirm-follow', size: 8 }),
      tagYes: h('input', { id: 'confirm-tag-yes' }), tagNo: h('input', { id: 'confirm-tag-no' }),
      cancel: h('input', { type: 'checkbox', id: 'confirm-cancel' }),
    };
    const confirmBox = h('fieldset', { class: 'confirm-settings', id: 'confirm-settings' },
      h('legend', {}, 'Confirmation'),
      h('label', { class: 'check' }, c.on, 'Ask the customer to confirm the order (cash on delivery)'),
      h('div', { class: 'confirm-fields' },
        field('Question', c.question, 'Asked as a poll on a linked phone (or “reply 1 or 2”).'),
        h('div', { class: 'row' }, field('Yes answer', c.yes), field('No answer', c.no)),
        h('div', { class: 'row' }, field('Tag for yes', c.tagYes), field('Tag for no', c.tagNo)),
        field('One reminder after', c.follow, 'Without an answer, one reminder this long after the question (0: none).'),
        h('label', { class: 'check' }, c.cancel, 'Cancel the order in the store when the answer is no')));
    const fillConfirm = (cf) => {
      c.on.checked = !!cf;
      const v = cf || { question: 'Please confirm your order {order_number}', yes: 'Yes, confirm', no: 'No, cancel', followUpAfter: '2h', tagYes: 'cod-confirmed', tagNo: 'cod-cancelled', cancelOnNo: false };
      c.question.value = v.question; c.yes.value = v.yes; c.no.value = v.no; c.follow.value = v.followUpAfter;
      c.tagYes.value = v.tagYes; c.tagNo.value = v.tagNo; c.cancel.checked = !!v.cancelOnNo;
      confirmBox.classList.toggle('off', !c.on.checked);
    };
    const previewText = () => {
      let t = render(text.value);
      // As a linked phone shows it: one poll (the message and the question) with the two answers.
      if (c.on.checked && confirmable.includes(current.topic)) t += '\n\n' + render(c.question.value) + '\n\n○ ' + c.yes.value + '\n○ ' + c.no.value + '\n\n(A poll: the customer taps an answer, or replies 1 or 2.)';
      return t;
    };
    const refresh = () => { preview.textContent = previewText(); };
    const show = () => {
      current = list.find((t) => t.topic === topic.value) || list[0];
      text.value = current.text;
      enabled.checked = current.enabled;
      origin.textContent = current.isDefault ? 'This is the default text.' : 'Your own text.';
      const checkout = current.topic === 'checkout_abandoned';
      wait.value = (checkout ? current.after : current.delay) || '0';
      waitField.querySelector('small').textContent = checkout
        ? 'The reminder goes this long after the checkout (1h by default), unless an order came from it.'
        : 'Hold the message this long (e.g. 10m); it is skipped if the order is cancelled meanwhile.';
      confirmBox.hidden = !confirmable.includes(current.topic);
      fillConfirm(current.confirm);
      refresh();
    };
    topic.addEventListener('change', () => { say(slot, '', ''); show(); });
    text.addEventListener('input', refresh);
    for (const k of ['question', 'yes', 'no']) c[k].addEventListener('input', refresh);
    c.on.addEventListener('change', () => { confirmBox.classList.toggle('off', !c.on.checked); refresh(); });
    const insert = (p) => {
      const s = text.selectionStart ?? text.value.length;
      text.value = text.value.slice(0, s) + p + text.value.slice(text.selectionEnd ?? s);
      text.focus();
      text.selectionStart = text.selectionEnd = s + p.length;
      refresh();
    };
    const save = async (body) => {
      try {
        const res = await api('PUT', '/api/client/templates', { topic: current.topic, ...body });
        Object.assign(current, res.template);
        show();
        say(slot, 'ok', 'Saved the “' + (topicNames[current.topic] || current.topic) + '” template.');
      } catch (e) { say(slot, 'error', sentence(e)); }
    };
    const testPhone = h('input', { id: 'template-test-phone', inputmode: 'tel', placeholder: '4915112345678', required: true });
    mount(el,
      h('div', { class: 'cols' },
        h('section', { class: 'card' },
          field('Event', topic),
          form({ id: 'template-form' }, [
            field('Message', text, 'Placeholders are filled from the order; click one to insert it.'),
            h('div', { class: 'chips' }, (r.placeholders || []).slice(0, 13).concat(['{recovery_url}']).map((p) => h('button', { type: 'button', class: 'chip', onclick: () => insert(p) }, p))),
            h('label', { class: 'check' }, enabled, 'Send this message for this event'),
            waitField, confirmBox,
            h('div', { class: 'row' }, h('button', { type: 'submit', id: 'template-save' }, 'Save'),
              h('button', { type: 'button', class: 'ghost', onclick: () => save({ text: '' }) }, 'Reset to default'), origin),
          ], () => {
            const body = { text: text.value, enabled: enabled.checked };
            body[current.topic === 'checkout_abandoned' ? 'after' : 'delay'] = wait.value.trim() || '0';
            if (confirmable.includes(current.topic)) {
              body.confirm = c.on.checked ? { question: c.question.value, yes: c.yes.value, no: c.no.value, followUpAfter: c.follow.value.trim() || '0',
                tagYes: c.tagYes.value, tagNo: c.tagNo.value, cancelOnNo: c.cancel.checked } : null;
            }
            return save(body);
          }), slot),
        h('section', { class: 'card' }, h('h2', {}, 'Preview'), h('p', { class: 'muted' }, 'On a sample order (#1001, John, two items).'), preview,
          form({ id: 'template-test' }, [field('Send the preview to', testPhone), h('button', { type: 'submit' }, 'Send a test')], async () => {
            try { await api('POST', '/api/client/templates/test', { phone: testPhone.value, text: previewText() }); say(slot, 'ok', 'The test message is sent.'); }
            catch (e) { say(slot, 'error', sentence(e)); }
          }))));
    show();
  }, (e) => mount(el, notice('error', sentence(e))));
}

// Words for a confirmation's write-back.
const writeWords = { pending: 'writing to the order…', done: 'written to the order', failed: 'not written to the order', none: 'the store has no API access' };

/** orders: the orders the store loop keeps, each with its confirmation and waiting messages. */
function orders(s) {
  return h('section', { class: 'card', id: 'store-orders' }, h('h2', {}, 'Order confirmations'),
    s.writeBack ? null : h('p', { class: 'muted' }, 'Answers are recorded here; connect the store with API access to write them to the orders too.'),
    table([
      { title: 'Order', cell: (o) => o.orderName || String(o.orderId) },
      { title: 'Customer', cell: (o) => (o.phone ? '+' + o.phone : '') },
      { title: 'Confirmation', cell: (o) => (o.confirmation ? [badge(o.confirmation.state),
        o.confirmation.answerText ? ' “' + o.confirmation.answerText + '”' : '',
        o.confirmation.writeBack ? h('small', { class: 'muted', 'data-writeback': o.confirmation.writeBack }, ' ' + writeWords[o.confirmation.writeBack] +
          (o.confirmation.writeError ? ': ' + o.confirmation.writeError : '')) : ''] : '—') },
      { title: 'Messages', cell: (o) => o.messages.map((m) => h('div', {}, topicNames[m.topic] || m.topic, ' ',
        m.skipped ? badge('skipped', 'Skipped (' + m.skipped.replace(/_/g, ' ') + ')') : m.sendAt ? badge('scheduled', 'At ' + when(m.sendAt)) : badge('sent'))) },
      { title: 'Order status', cell: (o) => (o.cancelled ? badge('cancelled') : '') },
    ], s.orders || [], 'No order asked to confirm yet. Turn the confirmation on in Templates.', (o) => ({ dataset: { order: String(o.orderId) } })));
}

function secretInput(name, placeholder) {
  return h('input', { name, type: 'password', autocomplete: 'off', placeholder: placeholder || '' });
}

/** store: the connected store, or the four ways to connect one. */
export function store(el) {
  const slot = h('div', { class: 'slot' });
  let shown = '';
  const load = async () => {
    let s;
    try { s = await api('GET', '/api/client/store'); } catch (e) { mount(el, notice('error', sentence(e))); return; }
    const now = JSON.stringify(s);
    if (now === shown) return;
    shown = now;
    if (s.connected) return connected(s);
    connect();
  };
  // A connected store's events come in by themselves: refresh while it is connected (a connect
  // form is never re-rendered under the user's hands).
  const timer = setInterval(() => { if (shown.includes('"connected":true')) load(); }, 5000);
  const connected = (s) => mount(el,
    h('section', { class: 'card', id: 'store-connected' },
      h('h2', {}, s.shopName || s.shop, ' ', badge('connected')),
      h('dl', {},
        h('dt', {}, 'Shop'), h('dd', { id: 'store-shop' }, s.shop),
        h('dt', {}, 'Platform'), h('dd', {}, s.platform || '—'),
        h('dt', {}, 'Connected by'), h('dd', {}, s.method || '—'),
        h('dt', {}, 'Since'), h('dd', {}, when(s.connectedAt)),
        h('dt', {}, 'Webhooks registered'), h('dd', {}, String(s.webhooksRegistered)),
        h('dt', {}, 'Webhook address'), h('dd', {}, s.webhookUrl ? [h('code', {}, s.webhookUrl), ' ', copyButton(s.webhookUrl)] : '—'),
        h('dt', {}, 'Signing secret'), h('dd', {}, s.hasWebhookSecret ? 'set (kept by the gateway, not shown)' : 'none: webhooks are accepted unsigned')),
      s.method === 'native' || s.platform === 'woocommerce' ? h('p', { class: 'muted' },
        'In the store’s admin, add a webhook for each order event pointing to the address above, signed with your secret.') : null,
      h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!confirm('Disconnect ' + s.shop + '? Its events will no longer send messages.')) return;
        try { await api('DELETE', '/api/client/store'); say(slot, 'ok', 'The store is disconnected.'); load(); } catch (e) { say(slot, 'error', sentence(e)); }
      } }, 'Disconnect'), slot),
    s.checkoutWebhookUrl ? h('section', { class: 'card' }, h('h2', {}, 'Abandoned carts'),
      h('p', { class: 'muted' }, 'In the Cart Abandonment Recovery plugin (CartFlows), turn on its webhook and paste this address:'),
      h('p', {}, h('code', { id: 'store-checkout-url' }, s.checkoutWebhookUrl), ' ', copyButton(s.checkoutWebhookUrl))) : null,
    orders(s),
    h('section', { class: 'card' }, h('h2', {}, 'Recent events'), table([
      { title: 'Received', cell: (e) => when(e.receivedAt) },
      { title: 'Event', cell: (e) => topicNames[e.topic] || e.topic },
      { title: 'Order', cell: (e) => e.orderName || e.orderId || '' },
      { title: 'Outcome', cell: (e) => [badge(e.status), e.sendAt && e.status === 'sent' ? ' goes ' + when(e.sendAt) : '', e.reason ? ' ' + e.reason : ''] },
      { title: 'To', cell: (e) => (e.phone ? '+' + e.phone : '') },
    ], s.events || [], 'No event yet. Place a test order in the store.')));

  const connect = () => {
    const tabs = {
      token: ['Access token', () => {
        const shop = h('input', { name: 'shop', placeholder: 'your-shop.myshopify.com', required: true });
        const tok = secretInput('accessToken', 'shpat_…');
        const sec = secretInput('webhookSecret', 'optional');
        return form({ id: 'connect-token' }, [h('p', { class: 'muted' }, 'Create a custom app in the store admin with the orders scopes, install it, and paste its Admin API access token. The gateway registers the five order webhooks.'),
          field('Shop domain', shop), field('Admin API access token', tok), field('Webhook signing secret', sec, 'The app’s API secret, to verify webhooks.'),
          h('button', { type: 'submit' }, 'Connect')], async () => {
          const body = { shop: shop.value.trim(), accessToken: tok.value.trim() };
          if (sec.value.trim()) body.webhookSecret = sec.value.trim();
          tok.value = ''; sec.value = '';
          try { const r = await api('POST', '/api/ecom/manual-connect', body); say(slot, 'ok', r.message || 'Connected.'); load(); }
          catch (e) { say(slot, 'error', sentence(e)); }
        });
      }],
      oauth: ['OAuth app', () => {
        const shop = h('input', { name: 'shop', placeholder: 'your-shop.myshopify.com', required: true });
        const id = h('input', { name: 'clientId', autocomplete: 'off' });
        const secret = secretInput('clientSecret');
        return form({ id: 'connect-oauth' }, [h('p', { class: 'muted' }, 'You are sent to the store to approve the app, then back here.'),
          field('Shop domain', shop), field('App client id', id, 'Leave empty to use the gateway’s own app.'), field('App client secret', secret),
          h('button', { type: 'submit' }, 'Continue to the store')], async () => {
          const body = { shop: shop.value.trim(), clientId: id.value.trim(), clientSecret: secret.value };
          secret.value = '';
          try { const r = await api('POST', '/api/ecom/oauth-init', body); location.assign(r.authUrl); }
          catch (e) { say(slot, 'error', sentence(e)); }
        });
      }],
      native: ['Native webhooks', () => {
        const shop = h('input', { name: 'shop', placeholder: 'your-shop.myshopify.com', required: true });
        const sec = secretInput('webhookSecret', 'optional');
        return form({ id: 'connect-native' }, [h('p', { class: 'muted' }, 'You add the webhooks in the store admin yourself; the gateway gives the address to paste.'),
          field('Shop domain', shop), field('Webhook signing secret', sec, 'Shown in the store admin’s webhook settings.'),
          h('button', { type: 'submit' }, 'Connect')], async () => {
          const body = { shop: shop.value.trim() };
          if (sec.value.trim()) body.webhookSecret = sec.value.trim();
          sec.value = '';
          try { const r = await api('POST', '/api/ecom/native-connect', body); say(slot, 'ok', r.message || 'Connected.'); load(); }
          catch (e) { say(slot, 'error', sentence(e)); }
        });
      }],
      woo: ['WooCommerce', () => {
        const domain = h('input', { name: 'domain', placeholder: 'shop.example.com', required: true });
        const sec = secretInput('webhookSecret', 'optional');
        const ck = secretInput('consumerKey', 'ck_… (optional)');
        const cs = secretInput('consumerSecret', 'cs_… (optional)');
        return form({ id: 'connect-woo' }, [h('p', { class: 'muted' }, 'In WooCommerce → Settings → Advanced → Webhooks, add one webhook per order event to the address shown after connecting.'),
          field('Store domain', domain), field('Webhook secret', sec),
          field('REST API consumer key', ck, 'WooCommerce → Settings → Advanced → REST API, read/write: lets a confirmation’s answer update the order.'),
          field('REST API consumer secret', cs), h('button', { type: 'submit' }, 'Connect')], async () => {
          const body = { platform: 'woocommerce', domain: domain.value.trim() };
          if (sec.value.trim()) body.webhookSecret = sec.value.trim();
          if (ck.value.trim()) { body.consumerKey = ck.value.trim(); body.consumerSecret = cs.value.trim(); }
          sec.value = ''; ck.value = ''; cs.value = '';
          try { await api('POST', '/api/client/store/connect', body); say(slot, 'ok', 'Connected.'); load(); }
          catch (e) { say(slot, 'error', sentence(e)); }
        });
      }],
    };
    const pane = h('div', {});
    const bar = h('div', { class: 'tabs', role: 'tablist' });
    const pick = (k) => {
      for (const b of bar.children) b.classList.toggle('active', b.dataset.tab === k);
      mount(pane, tabs[k][1]());
    };
    for (const [k, [title]] of Object.entries(tabs)) bar.append(h('button', { type: 'button', role: 'tab', dataset: { tab: k }, onclick: () => pick(k) }, title));
    mount(el, h('section', { class: 'card narrow' }, h('h2', {}, 'Connect your store'), bar, pane, slot));
    pick('token');
  };
  load();
  return () => clearInterval(timer);
}
