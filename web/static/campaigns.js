// campaigns.js: campaigns started from the dashboard: a name, the message with {name}, numbers
// pasted or from a CSV file with a header row, checked and previewed before the start; the
// list with live progress (campaign.progress events), per-number results and cancel.
import { h, mount, api, when, say, field, form, table, badge, sentence, notice, confirmInline, phoneDigits } from './lib.js';
import { meter } from './client.js';
import * as live from './live.js';

const phoneCols = ['phone', 'phone number', 'number', 'mobile', 'mobile number', 'whatsapp', 'telephone', 'tel', 'msisdn', 'cell'];
const nameCols = ['name', 'first name', 'first_name', 'firstname', 'full name', 'customer', 'customer name', 'contact'];

/** parseCSV reads CSV text (comma or semicolon, quoted fields, a BOM) into rows of cells. */
export function parseCSV(text) {
  text = text.replace(/^\uFEFF/, '');
  const first = text.split(/\r?\n/, 1)[0] || '';
  const delim = (first.match(/;/g) || []).length > (first.match(/,/g) || []).length ? ';' : ',';
  const rows = [];
  let row = [], cell = '', quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i++; } else if (c === '"') quoted = false; else cell += c;
    } else if (c === '"' && cell === '') quoted = true;
    else if (c === delim) { row.push(cell); cell = ''; }
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(cell); cell = '';
      if (row.some((x) => x.trim() !== '')) rows.push(row);
      row = [];
    } else cell += c;
  }
  row.push(cell);
  if (row.some((x) => x.trim() !== '')) rows.push(row);
  return rows;
}

/** recipientsFromCSV finds the phone and name columns by the header row. */
export function recipientsFromCSV(text) {
  const rows = parseCSV(text);
  if (!rows.length) return { error: 'The file is empty.' };
  const head = rows[0].map((c) => c.trim().toLowerCase());
  let pi = head.findIndex((c) => phoneCols.includes(c));
  const ni = head.findIndex((c) => nameCols.includes(c));
  let note = '';
  if (pi < 0) {
    if (phoneDigits(rows[0][0])) return { error: 'The first row must name the columns (for example: phone,name); it holds a number instead.' };
    pi = 0;
    note = 'No column is called phone: the first column (“' + rows[0][0] + '”) is read as the numbers.';
  }
  return { note, lines: rows.slice(1).map((r, i) => ({ line: i + 2, raw: (r[pi] || '').trim(), name: ni >= 0 ? (r[ni] || '').trim() : '' })) };
}

/** recipientsFromText reads pasted lines: a number, optionally a comma, semicolon or tab and a name. */
function recipientsFromText(text) {
  return text.split(/\r?\n/).map((l, i) => {
    const m = l.match(/^([^,;\t]*)[,;\t]?(.*)$/);
    return { line: i + 1, raw: m[1].trim(), name: m[2].trim() };
  }).filter((r) => r.raw !== '' || r.name !== '');
}

/** check validates recipients: good ones (deduplicated), refused ones with why. */
function check(lines) {
  const seen = new Set();
  const good = [], bad = [];
  let dupes = 0;
  for (const r of lines) {
    const d = phoneDigits(r.raw);
    if (!d) { bad.push({ ...r, why: r.raw ? 'not a phone number with its country code (8 to 15 digits)' : 'no number' }); continue; }
    if (seen.has(d)) { dupes++; continue; }
    seen.add(d);
    good.push({ phone: d, name: r.name });
  }
  return { good, bad, dupes };
}

const fillName = (text, name) => text.split('{name}').join(name);

export function campaigns(el) {
  const subs = live.subscriptions();
  const slot = h('div', { class: 'slot' });
  const listSlot = h('div', { class: 'slot' });
  const list = h('div', { id: 'campaign-list' }, h('p', { class: 'muted' }, 'Loading…'));
  const results = h('div', { id: 'campaign-results' });
  const preview = h('div', { id: 'campaign-preview' });
  const name = h('input', { name: 'name', id: 'campaign-name', required: true, maxlength: 100, placeholder: 'Spring sale' });
  const message = h('textarea', { name: 'message', id: 'campaign-message', rows: 4, required: true, placeholder: 'Hi {name}, our spring sale starts today!' });
  const numbers = h('textarea', { name: 'numbers', id: 'campaign-numbers', rows: 5, placeholder: '4915112345678, Anna\n4915112345679, Ben' });
  const file = h('input', { type: 'file', name: 'csv', id: 'campaign-csv', accept: '.csv,text/csv,text/plain' });
  const delay = h('input', { type: 'number', name: 'delay', id: 'campaign-delay', min: 0, max: 3600, step: 'any', value: 5 });
  let fileText = null, fileName = '';
  let checked = null;
  let openResults = '';

  const invalidate = () => { checked = null; mount(preview); };
  for (const i of [name, message, numbers, delay]) i.addEventListener('input', invalidate);
  file.addEventListener('change', async () => {
    invalidate();
    fileText = null;
    if (!file.files.length) return;
    fileName = file.files[0].name;
    fileText = await file.files[0].text();
  });
  const insertName = () => {
    const s = message.selectionStart ?? message.value.length;
    message.value = message.value.slice(0, s) + '{name}' + message.value.slice(message.selectionEnd ?? s);
    message.focus();
    invalidate();
  };

  const doCheck = () => {
    say(slot, '', '');
    let lines = [], note = '';
    if (fileText != null) {
      const r = recipientsFromCSV(fileText);
      if (r.error) { say(slot, 'error', fileName + ': ' + r.error); return; }
      lines = r.lines;
      note = r.note;
    }
    lines = lines.concat(recipientsFromText(numbers.value));
    if (!name.value.trim()) { say(slot, 'error', 'Give the campaign a name.'); name.focus(); return; }
    if (!message.value.trim()) { say(slot, 'error', 'Write the message.'); message.focus(); return; }
    const d = Number(delay.value);
    if (!(d >= 0 && d <= 3600)) { say(slot, 'error', 'The pause between messages must be 0 to 3600 seconds.'); delay.focus(); return; }
    const c = check(lines);
    if (!c.good.length) { say(slot, 'error', lines.length ? 'None of the numbers can be sent to: see below.' : 'Paste numbers or choose a CSV file.'); }
    const usesName = message.value.includes('{name}');
    const unnamed = usesName ? c.good.filter((r) => !r.name).length : 0;
    checked = c.good.length ? { name: name.value.trim(), message: message.value, delay: d, recipients: c.good } : null;
    const minutes = Math.ceil((c.good.length * d) / 60);
    mount(preview,
      h('h3', {}, 'Check before you start'),
      note ? notice('info', note) : null,
      h('div', { class: 'counts', id: 'campaign-counts' },
        h('span', {}, h('strong', { id: 'campaign-good' }, String(c.good.length)), ' numbers to send to'),
        c.dupes ? h('span', {}, String(c.dupes), ' repeated, sent once') : null,
        c.bad.length ? h('span', {}, h('strong', {}, String(c.bad.length)), ' refused') : null,
        c.good.length ? h('span', {}, 'about ' + (minutes <= 1 ? 'a minute' : minutes + ' minutes') + ' at this pace') : null),
      unnamed ? notice('warn', unnamed + ' number(s) have no name: their {name} stays empty.') : null,
      c.good.length ? h('div', {}, h('p', { class: 'muted' }, 'The first message, as +' + c.good[0].phone + ' gets it:'),
        h('pre', { class: 'bubble', id: 'campaign-first' }, fillName(message.value, c.good[0].name))) : null,
      c.good.length ? h('div', { class: 'preview-list', tabindex: '0', role: 'region', 'aria-label': 'Numbers to send to' }, table([
        { title: 'Number', cell: (r) => '+' + r.phone },
        { title: 'Name', cell: (r) => r.name || '—' },
      ], c.good.slice(0, 200))) : null,
      c.good.length > 200 ? h('p', { class: 'muted' }, 'And ' + (c.good.length - 200) + ' more.') : null,
      c.bad.length ? h('div', {}, h('h3', {}, 'Refused'), table([
        { title: 'Line', cell: (r) => String(r.line) },
        { title: 'Value', cell: (r) => r.raw || '—' },
        { title: 'Why', cell: (r) => r.why },
      ], c.bad.slice(0, 100))) : null,
      checked ? h('button', { type: 'button', id: 'campaign-start', onclick: start }, 'Start: send to ' + c.good.length + ' numbers') : null);
  };

  const start = async () => {
    if (!checked) return;
    const body = { name: checked.name, message: checked.message, delay: checked.delay,
      numbers: checked.recipients.map((r) => (r.name ? { phone: r.phone, name: r.name } : r.phone)) };
    const btn = preview.querySelector('#campaign-start');
    if (btn) btn.disabled = true;
    try {
      const c = await api('POST', '/api/client/campaigns', body);
      say(slot, 'ok', 'Started “' + c.name + '”: it goes out in the background; its progress shows below.');
      name.value = message.value = numbers.value = '';
      file.value = '';
      fileText = null;
      invalidate();
      await load();
      showResults(c.campaign_id);
    } catch (e) { say(slot, 'error', sentence(e)); if (btn) btn.disabled = false; }
  };

  const rows = new Map();
  const progressCell = (c) => h('span', { class: 'progress', 'data-processed': String(c.total_processed || 0) }, meter(c.total_processed || 0, c.total_requested || 0));
  const load = async () => {
    try {
      const r = await api('GET', '/api/client/campaigns');
      rows.clear();
      mount(list, table([
        { title: 'Campaign', cell: (c) => [h('strong', {}, c.name || 'Campaign ' + c.campaign_id.slice(0, 8)), h('br'), h('small', { class: 'muted' }, when(c.created_at))] },
        { title: 'Status', cell: (c) => badge(c.status) },
        { title: 'Progress', cell: progressCell },
        { title: 'Sent / not sent', cell: (c) => h('span', { class: 'counts-cell' }, (c.successful || 0) + ' / ' + (c.failed || 0)) },
        { title: '', label: 'Actions', cell: (c) => h('div', { class: 'row' },
          h('button', { type: 'button', class: 'small ghost', onclick: () => showResults(c.campaign_id) }, 'Results'),
          c.status === 'running' || c.status === 'queued' ? h('button', { type: 'button', class: 'small danger', onclick: () => confirmInline(listSlot,
            'Stop “' + (c.name || c.campaign_id) + '”? Numbers not sent yet are not sent.', 'Stop it', async () => {
              try { await api('DELETE', '/api/client/campaigns?id=' + encodeURIComponent(c.campaign_id)); load(); } catch (e) { say(listSlot, 'error', sentence(e)); }
            }) }, 'Cancel') : null) },
      ], r.campaigns || [], 'No campaign yet. Start one above: paste numbers or choose a CSV file.', (c) => {
        const attrs = { 'data-campaign': c.campaign_id, 'data-status': c.status };
        return attrs;
      }));
      for (const tr of list.querySelectorAll('tr[data-campaign]')) rows.set(tr.dataset.campaign, tr);
    } catch (e) { mount(list, notice('error', sentence(e))); }
  };
  // update lays an event's counts over its row; a campaign not listed yet reloads the list.
  const update = (d) => {
    const tr = rows.get(d.campaignId);
    if (!tr) { load(); return; }
    tr.dataset.status = d.status;
    const cells = tr.querySelectorAll('td');
    mount(cells[1], badge(d.status));
    mount(cells[2], progressCell(d));
    mount(cells[3], h('span', { class: 'counts-cell' }, d.successful + ' / ' + d.failed));
    if (d.status !== 'running' && d.status !== 'queued') { const b = cells[4].querySelector('.danger'); if (b) b.remove(); }
    if (openResults === d.campaignId) resultsSoon();
  };
  let resultsTimer = null;
  const resultsSoon = () => { clearTimeout(resultsTimer); resultsTimer = setTimeout(() => showResults(openResults), 400); };
  const showResults = async (id) => {
    openResults = id;
    try {
      const c = await api('GET', '/api/client/campaigns/details?id=' + encodeURIComponent(id));
      if (openResults !== id) return;
      mount(results, h('section', { class: 'card' },
        h('div', { class: 'spread' }, h('h2', {}, 'Results: ' + (c.name || c.campaign_id)),
          h('button', { type: 'button', class: 'small ghost', onclick: () => { openResults = ''; results.replaceChildren(); } }, 'Close')),
        h('p', {}, badge(c.status), ' ', (c.total_processed || 0) + ' of ' + c.total_requested + ' processed; ' + c.successful + ' sent, ' + c.failed + ' not sent.'),
        h('pre', { class: 'bubble' }, c.message),
        table([
          { title: 'Number', cell: (d) => '+' + d.number.replace(/^\+/, '') },
          { title: 'Outcome', cell: (d) => badge(d.success ? 'sent' : 'failed') },
          { title: 'Why', cell: (d) => d.error || '' },
        ], c.details || [], 'No number processed yet.')));
    } catch (e) { mount(results, notice('error', sentence(e))); }
  };
  subs.on('campaign.progress', update);
  subs.on('campaign.completed', update);
  subs.on('resync', load);

  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'New campaign'),
      form({ id: 'campaign-form' }, [
        field('Name', name, 'What you call it here, for example “Spring sale”.'),
        field('Message', message),
        h('div', { class: 'chips' }, h('button', { type: 'button', class: 'chip', onclick: insertName }, '{name}'),
          h('small', { class: 'muted' }, 'becomes each customer’s name (from the list or the file’s name column).')),
        field('Numbers: one per line, with the country code; a name may follow after a comma', numbers),
        field('Or a CSV file with a header row (columns phone and name)', file),
        field('Pause between two messages (seconds)', delay, 'A slower pace looks less like spam to the network.'),
        h('button', { type: 'submit', class: 'ghost', id: 'campaign-check' }, 'Check the list')], async () => doCheck()),
      slot, preview),
    h('section', { class: 'card' }, h('h2', {}, 'Your campaigns'), listSlot, list),
    results);
  load();
  return () => { subs.stop(); clearTimeout(resultsTimer); };
}
