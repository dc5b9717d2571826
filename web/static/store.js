// store.js: the store screens: message templates (editor with a live preview) and the store
// connection (OAuth, access token, native webhooks, WooCommerce; webhook address; recent events).
import { h, mount, api, when, say, field, form, table, badge, copyButton, sentence, notice } from './lib.js';

const topicNames = {
  'orders/create': 'Order placed',
  'orders/paid': 'Order paid',
  'fulfillments/create': 'Order shipped',
  'orders/cancelled': 'Order cancelled',
  'refunds/create': 'Refund processed',
};

// The sample order of the preview (the same one the gateway's template tests use).
const sample = {
  customerName: 'John', phone: '15555557447', address: '123 Shipping Street', orderName: '#1001', orderId: 450789469,
  total: '10.00', currency: 'USD', paymentMethod: 'visa', items: [['Soda', 1], ['Another Beer', 3]], shippingCity: 'Shippington',
  trackingNumber: '123456789', trackingUrl: 'https://shipping.xyz/track.php?num=123456789', trackingCompany: 'Bluedart',
  refundAmount: '4.50', orderStatusUrl: 'https://shop.example/status/1', storeName: 'Alice’s Shop',
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
    order_status_url: ev.orderStatusUrl, store_name: ev.storeName,
  };
  const camel = { customerName: 'customer_name', customerPhone: 'customer_phone', customerAddress: 'customer_address', orderNumber: 'order_number',
    orderId: 'order_id', totalPrice: 'order_total', paymentMethod: 'payment_method', itemsList: 'items_list', itemsCount: 'items_count',
    shippingCity: 'shipping_city', trackingNumber: 'tracking_number', trackingUrl: 'tracking_url', trackingCompany: 'tracking_company',
    trackingInfo: 'tracking_info', refundAmount: 'refund_amount', orderStatusUrl: 'order_status_url', storeName: 'store_name' };
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
    const show = () => {
      current = list.find((t) => t.topic === topic.value) || list[0];
      text.value = current.text;
      enabled.checked = current.enabled;
      origin.textContent = current.isDefault ? 'This is the default text.' : 'Your own text.';
      preview.textContent = render(text.value);
    };
    topic.addEventListener('change', () => { say(slot, '', ''); show(); });
    text.addEventListener('input', () => { preview.textContent = render(text.value); });
    const insert = (p) => {
      const s = text.selectionStart ?? text.value.length;
      text.value = text.value.slice(0, s) + p + text.value.slice(text.selectionEnd ?? s);
      text.focus();
      text.selectionStart = text.selectionEnd = s + p.length;
      preview.textContent = render(text.value);
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
            h('div', { class: 'chips' }, (r.placeholders || []).slice(0, 13).map((p) => h('button', { type: 'button', class: 'chip', onclick: () => insert(p) }, p))),
            h('label', { class: 'check' }, enabled, 'Send this message for this event'),
            h('div', { class: 'row' }, h('button', { type: 'submit', id: 'template-save' }, 'Save'),
              h('button', { type: 'button', class: 'ghost', onclick: () => save({ text: '' }) }, 'Reset to default'), origin),
          ], () => save({ text: text.value, enabled: enabled.checked })), slot),
        h('section', { class: 'card' }, h('h2', {}, 'Preview'), h('p', { class: 'muted' }, 'On a sample order (#1001, John, two items).'), preview,
          form({ id: 'template-test' }, [field('Send the preview to', testPhone), h('button', { type: 'submit' }, 'Send a test')], async () => {
            try { await api('POST', '/api/client/templates/test', { phone: testPhone.value, text: render(text.value) }); say(slot, 'ok', 'The test message is sent.'); }
            catch (e) { say(slot, 'error', sentence(e)); }
          }))));
    show();
  }, (e) => mount(el, notice('error', sentence(e))));
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
    h('section', { class: 'card' }, h('h2', {}, 'Recent events'), table([
      { title: 'Received', cell: (e) => when(e.receivedAt) },
      { title: 'Event', cell: (e) => topicNames[e.topic] || e.topic },
      { title: 'Order', cell: (e) => e.orderName || e.orderId || '' },
      { title: 'Outcome', cell: (e) => [badge(e.status), e.reason ? ' ' + e.reason : ''] },
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
        return form({ id: 'connect-woo' }, [h('p', { class: 'muted' }, 'In WooCommerce → Settings → Advanced → Webhooks, add one webhook per order event to the address shown after connecting.'),
          field('Store domain', domain), field('Webhook secret', sec), h('button', { type: 'submit' }, 'Connect')], async () => {
          const body = { platform: 'woocommerce', domain: domain.value.trim() };
          if (sec.value.trim()) body.webhookSecret = sec.value.trim();
          sec.value = '';
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
