// optouts.js: the audience screen: the suppression list (customers who replied STOP, or were
// added here; add, remove), the words and replies of an opt-out, and the quiet hours in which
// campaign and store messages wait.
import { h, mount, api, when, say, field, form, table, badge, sentence, notice, confirmInline } from './lib.js';

const sources = { reply: 'They replied', api: 'Added through the API', dashboard: 'Added here' };

/** optouts renders the screen into el. */
export function optouts(el) {
  const slot = h('div', { class: 'slot' });
  const listSlot = h('div', {});
  const settingsSlot = h('div', {});
  const load = async () => {
    let list, me;
    try {
      [list, me] = await Promise.all([api('GET', '/api/client/optouts'), api('GET', '/api/client/me')]);
    } catch (e) { mount(el, notice('error', sentence(e))); return; }
    const rows = list.optouts || [];
    mount(listSlot, table([
      { title: 'Phone', cell: (o) => '+' + o.phone },
      { title: 'Since', cell: (o) => when(o.at) },
      { title: 'How', cell: (o) => [sources[o.source] || o.source, o.word ? ' “' + o.word + '”' : ''] },
      { label: 'Remove', cell: (o) => h('button', { type: 'button', class: 'small ghost', 'data-remove': o.phone, onclick: () => confirmInline(slot,
        'Send campaigns and store messages to +' + o.phone + ' again?', 'Remove from the list', async () => {
          try { await api('DELETE', '/api/client/optouts?phone=' + encodeURIComponent(o.phone)); say(slot, 'ok', '+' + o.phone + ' is off the list.'); load(); }
          catch (e) { say(slot, 'error', sentence(e)); }
        }) }, 'Remove') },
    ], rows, 'Nobody has opted out.', (o) => ({ dataset: { phone: o.phone } })));
    settings(me.settings || {});
  };

  const settings = (st) => {
    const words = h('input', { id: 'optout-words', value: (st.stopWords || []).join(' '), placeholder: 'HALT BASTA' });
    const stopReply = h('textarea', { id: 'optout-reply', rows: 2, placeholder: st.defaultStopReply || '' });
    stopReply.value = st.stopReply || '';
    const startReply = h('textarea', { id: 'optout-start-reply', rows: 2, placeholder: st.defaultStartReply || '' });
    startReply.value = st.startReply || '';
    const tz = h('input', { id: 'quiet-timezone', value: st.timezone || 'UTC', list: 'quiet-zones', autocomplete: 'off' });
    const zones = h('datalist', { id: 'quiet-zones' }, (Intl.supportedValuesOf ? Intl.supportedValuesOf('timeZone') : []).map((z) => h('option', { value: z })));
    const quietOn = h('input', { type: 'checkbox', id: 'quiet-on' });
    quietOn.checked = !!st.quietHours;
    const from = h('input', { type: 'time', id: 'quiet-from', value: (st.quietHours && st.quietHours.from) || '21:00' });
    const to = h('input', { type: 'time', id: 'quiet-to', value: (st.quietHours && st.quietHours.to) || '08:00' });
    mount(settingsSlot,
      form({ id: 'optout-settings' }, [
        h('p', { class: 'muted' }, 'A customer who writes exactly one of ', h('strong', {}, (st.defaultStopWords || []).join(', ')),
          ' (or one of your own words) is put on the list and answered once; START takes them off.'),
        field('Your own stop words', words, 'Separated by spaces.'),
        field('Answer to a stop word', stopReply, 'Empty: the default shown.'),
        field('Answer to START', startReply, 'Empty: the default shown.'),
        h('fieldset', {}, h('legend', {}, 'Quiet hours'),
          h('label', { class: 'check' }, quietOn, 'Hold campaign and store messages at night (API sends and replies still go)'),
          h('div', { class: 'row' }, field('From', from), field('To', to)),
          field('Time zone', tz), zones),
        h('button', { type: 'submit', id: 'optout-settings-save' }, 'Save'),
      ], async () => {
        const body = {
          stopWords: words.value.split(/\s+/).filter(Boolean), stopReply: stopReply.value, startReply: startReply.value,
          timezone: tz.value.trim() === 'UTC' ? '' : tz.value.trim(),
          quietHours: quietOn.checked ? { from: from.value, to: to.value } : null,
        };
        try { await api('PATCH', '/api/client/me', body); say(slot, 'ok', 'Saved.'); }
        catch (e) { say(slot, 'error', sentence(e)); }
      }));
  };

  const phone = h('input', { id: 'optout-phone', inputmode: 'tel', placeholder: '4915112345678', required: true });
  mount(el,
    h('div', { class: 'cols' },
      h('section', { class: 'card', id: 'optout-list' }, h('h2', {}, 'Opted out ', badge('opted_out', 'No campaigns, no store messages')),
        h('p', { class: 'muted' }, 'Campaigns and store messages skip these numbers (nothing is charged for them); a send from the API or the Send screen needs “transactional”.'),
        form({ id: 'optout-add' }, [h('div', { class: 'row' }, field('Add a number', phone), h('button', { type: 'submit' }, 'Add'))], async () => {
          try {
            const r = await api('POST', '/api/client/optouts', { phone: phone.value });
            say(slot, 'ok', (r.added || []).length ? 'Added.' : 'It was on the list already.');
            phone.value = '';
            load();
          } catch (e) { say(slot, 'error', sentence(e)); }
        }), slot, listSlot),
      h('section', { class: 'card' }, h('h2', {}, 'Opt-out words and quiet hours'), settingsSlot)));
  load();
}
