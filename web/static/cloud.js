// cloud.js: the Cloud API screen (DESIGN.md section 17): connect a WhatsApp Cloud API number
// (its webhook URL and verify token to paste in Meta's app settings, the token shown once), its
// status and templates, and the routing between the linked phone and the number.
import { h, mount, api, when, say, field, form, table, badge, copyButton, sentence, notice, confirmInline } from './lib.js';
import * as live from './live.js';
import { showOnce } from './client.js';

const reasons = {
  token_invalid: 'Meta refused the access token (expired or revoked). Connect the number again with a new token: messages wait meanwhile.',
  network: 'Meta could not be reached; the gateway tries again by itself.',
  logged_out: 'The number was disconnected from the gateway.',
};

const modes = {
  linked: 'Linked phone: every message goes from the linked phone (templates, buttons and lists still go over the Cloud API number).',
  auto: 'Automatic: contacts who know the linked phone get their messages there; new contacts, and first messages while WhatsApp holds the phone back, go over the Cloud API number (free inside the 24-hour window after the contact wrote, else as the cold template).',
  cloud: 'Cloud API number: every message goes over the Cloud API number.',
};

/** cloud: the Cloud API number (connect, status, templates) and the routing. */
export function cloud(el) {
  const subs = live.subscriptions();
  const slot = h('div', { class: 'slot' });
  const once = h('div', { id: 'cloud-once' });
  const numberBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const routingBox = h('div', {});
  const templatesBox = h('div', {});
  let stopped = false;
  let templates = [];

  const connectForm = (again) => {
    const inputs = {
      phoneNumberId: h('input', { name: 'phoneNumberId', id: 'cloud-phone-number-id', inputmode: 'numeric', required: true, autocomplete: 'off' }),
      wabaId: h('input', { name: 'wabaId', id: 'cloud-waba-id', inputmode: 'numeric', required: true, autocomplete: 'off' }),
      accessToken: h('input', { name: 'accessToken', id: 'cloud-token', type: 'password', required: true, autocomplete: 'off' }),
      appSecret: h('input', { name: 'appSecret', id: 'cloud-secret', type: 'password', required: true, autocomplete: 'off' }),
    };
    if (again) { inputs.phoneNumberId.value = again.phoneNumberId; inputs.wabaId.value = again.wabaId; }
    return form({ id: 'cloud-connect' }, [
      field('Phone number ID', inputs.phoneNumberId, 'Meta’s app dashboard → WhatsApp → API Setup.'),
      field('WhatsApp Business Account ID', inputs.wabaId, 'Same page, under the phone number.'),
      field('Access token', inputs.accessToken, 'A system user’s permanent token (Business settings → System users) with whatsapp_business_messaging and whatsapp_business_management.'),
      field('App secret', inputs.appSecret, 'App settings → Basic → App secret: it checks the webhooks’ signature.'),
      h('button', { type: 'submit', id: 'cloud-connect-button' }, again ? 'Connect again' : 'Connect'),
    ], async (f) => {
      const body = {};
      for (const [k, i] of Object.entries(inputs)) body[k] = i.value.trim();
      say(slot, 'info', 'Checking the number with Meta…');
      try {
        const r = await api('POST', '/api/client/cloud/connect', body);
        // The token and the secret leave the page at once.
        inputs.accessToken.value = ''; inputs.appSecret.value = '';
        f.reset();
        say(slot, 'ok', 'Connected ' + (r.number.displayPhone || '+' + r.number.phone) + ' (' + r.templates + ' templates synced).');
        showOnce(once, 'Paste these in Meta’s app settings (WhatsApp → Configuration → Webhook)',
          r.verifyToken, 'This is the verify token: Meta sends it back when you save the callback URL below. It is shown this once. Subscribe the webhook to the “messages” field.');
        once.prepend(h('p', {}, 'Callback URL: ', h('code', { id: 'cloud-webhook-once' }, r.number.webhookUrl), ' ', copyButton(r.number.webhookUrl)));
        load();
      } catch (e) { inputs.accessToken.value = ''; inputs.appSecret.value = ''; say(slot, 'error', sentence(e)); }
    });
  };

  const numberView = (n, waiting) => {
    const again = h('div', {});
    return h('div', { id: 'cloud-number', 'data-status': n.status },
      h('div', { class: 'status-line' }, h('span', { id: 'cloud-status', 'data-status': n.status }, badge(n.status, n.status === 'CONNECTED' ? 'Connected' : undefined)),
        h('span', { class: 'phone' }, n.displayPhone || '+' + n.phone), n.verifiedName ? h('span', {}, n.verifiedName) : null),
      n.statusReason ? notice(n.statusReason === 'token_invalid' ? 'error' : 'warn', reasons[n.statusReason] || n.statusReason) : null,
      h('dl', { class: 'facts' },
        h('dt', {}, 'Quality'), h('dd', {}, n.quality || '—'),
        h('dt', {}, 'Pace'), h('dd', {}, n.throughput + ' messages a second (Meta’s throughput)'),
        h('dt', {}, 'Waiting for their contacts'), h('dd', { id: 'cloud-waiting' }, String(waiting)),
        h('dt', {}, 'Connected'), h('dd', {}, when(n.connectedAt)),
        h('dt', {}, 'Webhook URL'), h('dd', {}, h('code', { id: 'cloud-webhook-url' }, n.webhookUrl), ' ', copyButton(n.webhookUrl))),
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'ghost', id: 'cloud-again', onclick: () => mount(again, connectForm(n)) }, 'Connect again with a new token'),
        h('button', { type: 'button', class: 'ghost', id: 'cloud-disconnect', onclick: () => confirmInline(again, 'Disconnect this number? Messages waiting to go out over it fail.', 'Disconnect', async () => {
          try { await api('DELETE', '/api/client/cloud'); say(slot, 'ok', 'Disconnected.'); load(); } catch (e) { say(slot, 'error', sentence(e)); }
        }) }, 'Disconnect')),
      again);
  };

  const routingView = (r, connected) => {
    const mode = h('select', { id: 'routing-mode', name: 'mode' }, Object.keys(modes).map((m) => h('option', { value: m, selected: m === r.mode }, m === 'auto' ? 'Automatic' : m === 'linked' ? 'Linked phone' : 'Cloud API number')));
    const explain = h('small', { id: 'routing-explain' }, modes[r.mode]);
    mode.addEventListener('change', () => { explain.textContent = modes[mode.value]; });
    const usable = templates.filter((t) => t.status === 'APPROVED' && t.parameters >= 1);
    const cold = h('select', { id: 'routing-cold', name: 'coldTemplate' }, h('option', { value: '' }, 'None: wait for the contact to write (72 hours)'),
      usable.map((t) => h('option', { value: t.name + '\u0000' + t.language, selected: r.coldTemplate && r.coldTemplate.name === t.name && r.coldTemplate.language === t.language }, t.name + ' (' + t.language + ')')));
    return form({ id: 'routing-form' }, [
      field('Send messages', mode, explain),
      field('Cold template', cold, 'A new contact outside the 24-hour window gets a text as this template (the text is its first parameter); Meta charges it. Other kinds, and texts without a cold template, wait for the contact to write.'),
      h('button', { type: 'submit', id: 'routing-save', disabled: !connected && mode.value !== 'linked' }, 'Save'),
    ], async () => {
      const [name, language] = cold.value ? cold.value.split('\u0000') : [];
      try {
        await api('PATCH', '/api/client/routing', { mode: mode.value, coldTemplate: name ? { name, language } : null });
        say(slot, 'ok', 'Routing saved.');
      } catch (e) { say(slot, 'error', sentence(e)); }
    });
  };

  const templatesView = () => table([
    { title: 'Name', cell: (t) => h('code', {}, t.name) },
    { title: 'Language', cell: (t) => t.language },
    { title: 'Category', cell: (t) => t.category },
    { title: 'Status', cell: (t) => badge(t.status === 'APPROVED' ? 'active' : t.status === 'PENDING' ? 'pending' : 'disabled', t.status.charAt(0) + t.status.slice(1).toLowerCase()) },
    { title: 'Body', cell: (t) => h('span', { class: 'body' }, t.body || '—') },
  ], templates, 'No template in the WhatsApp Business Account yet: create them in Meta’s WhatsApp Manager.', (t) => ({ 'data-template': t.name }));

  const load = async () => {
    let st;
    try { st = await api('GET', '/api/client/cloud'); } catch (e) { if (!stopped) say(slot, 'error', sentence(e)); return; }
    if (stopped) return;
    if (st.number) {
      try { templates = (await api('GET', '/api/client/cloud/templates')).templates || []; } catch (e) { templates = []; say(slot, 'error', sentence(e)); }
      if (stopped) return;
      mount(numberBox, numberView(st.number, st.waiting));
      mount(templatesBox, templatesView());
    } else {
      templates = [];
      mount(numberBox, h('p', {}, 'No Cloud API number is connected. The official WhatsApp Cloud API reaches customers who never wrote to you (with an approved template), which a linked phone may not.'), connectForm());
      mount(templatesBox, h('p', { class: 'empty' }, 'The number’s templates show once it is connected.'));
    }
    mount(routingBox, routingView(st.routing, !!st.number));
  };

  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'Cloud API number'), slot, once, numberBox),
    h('div', { class: 'cols' },
      h('section', { class: 'card' }, h('h2', {}, 'Routing'), routingBox),
      h('section', { class: 'card' }, h('h2', {}, 'Templates'), h('p', { class: 'muted' }, 'Synced from Meta each time this page opens. Only approved ones can be sent.'), templatesBox)));
  load();
  subs.on('session.status', (d) => { if (numberBox.querySelector(`[data-status]`) && d) load(); });
  subs.on('resync', load);
  return () => { stopped = true; subs.stop(); };
}
