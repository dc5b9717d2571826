// admin.js: the admin screens: users (role, plan), API keys (create with the raw key shown
// once, revoke, delete) and sessions (create, assign).
import { h, mount, api, when, say, field, form, table, badge, sentence, notice, confirmInline } from './lib.js';
import { showOnce } from './client.js';

const plans = ['free', 'starter', 'business', 'unlimited'];

function planList(id) {
  return h('datalist', { id }, plans.map((p) => h('option', { value: p })));
}

function usersList(id, users) {
  return h('datalist', { id }, users.map((u) => h('option', { value: u.id }, u.name || u.email || '')));
}

/** users: every profile, with its role (changed after a confirmation) and plan editable; pre-provision a user. */
export function users(el, me) {
  const slot = h('div', { class: 'slot' });
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const load = async () => {
    let rows;
    try { rows = await api('GET', '/api/admin/users'); } catch (e) { mount(list, notice('error', sentence(e))); return; }
    mount(list, planList('plans'), table([
      { title: 'User id', cell: (u) => h('code', {}, u.id) },
      { title: 'Name', cell: (u) => u.name },
      { title: 'Email', cell: (u) => u.email },
      { title: 'Role', cell: (u) => {
        const s = h('select', { 'aria-label': 'role of ' + u.id }, ['client', 'admin'].map((r) => h('option', { value: r, selected: u.role === r }, r)));
        // A role change is asked about first: one slip would promote or demote someone.
        s.addEventListener('change', () => {
          const to = s.value;
          if (me && u.id === me.uid && to !== 'admin') {
            s.value = u.role;
            say(slot, 'error', 'You cannot take the admin role from yourself: ask another administrator.');
            return;
          }
          confirmInline(slot, (to === 'admin' ? 'Make ' + u.id + ' an administrator? They can manage every key, user and session.' : 'Make ' + u.id + ' a client? They lose the admin screens.'),
            'Change the role', () => patch(u, { role: to }), () => { s.value = u.role; });
        });
        return s;
      } },
      { title: 'Plan', cell: (u) => {
        const i = h('input', { value: u.plan, list: 'plans', size: 10, 'aria-label': 'plan of ' + u.id });
        i.addEventListener('change', () => patch(u, { plan: i.value.trim() }));
        return i;
      } },
      { title: 'Since', cell: (u) => when(u.createdAt) },
    ], rows, 'No user yet: a profile is made on a user’s first sign-in.'));
  };
  const patch = async (u, change) => {
    try { await api('PATCH', '/api/admin/users', { id: u.id, ...change }); say(slot, 'ok', 'Updated ' + u.id + '.'); }
    catch (e) { say(slot, 'error', sentence(e)); load(); }
  };
  const id = h('input', { name: 'id', required: true });
  const name = h('input', { name: 'name' });
  const email = h('input', { name: 'email', type: 'email' });
  const role = h('select', { name: 'role' }, h('option', { value: 'client' }, 'client'), h('option', { value: 'admin' }, 'admin'));
  const plan = h('input', { name: 'plan', list: 'plans', placeholder: 'free' });
  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'Users'), slot, list),
    h('section', { class: 'card' }, h('h2', {}, 'Add a user'), h('p', { class: 'muted' }, 'The user signs in later with this id (the identity provider’s uid).'),
      form({ id: 'user-form', class: 'inline' }, [field('User id', id), field('Name', name), field('Email', email), field('Role', role), field('Plan', plan),
        h('button', { type: 'submit' }, 'Add')], async () => {
        const body = { id: id.value.trim(), name: name.value.trim(), email: email.value.trim(), role: role.value };
        if (plan.value.trim()) body.plan = plan.value.trim();
        try { await api('POST', '/api/admin/users', body); say(slot, 'ok', 'Added ' + body.id + '.'); id.value = name.value = email.value = plan.value = ''; load(); }
        catch (e) { say(slot, 'error', sentence(e)); }
      })));
  load();
}

/** keys: every API key; create one (its raw key shown once), revoke, reactivate, delete. */
export function keys(el) {
  const slot = h('div', { class: 'slot' });
  const once = h('div', { id: 'key-once' });
  const list = h('div', { id: 'key-list' }, h('p', { class: 'muted' }, 'Loading…'));
  const userIds = h('div', {});
  const load = async () => {
    let rows;
    try { rows = await api('GET', '/api/admin/apikeys'); } catch (e) { mount(list, notice('error', sentence(e))); return; }
    mount(list, table([
      { title: 'Name', cell: (k) => k.name },
      { title: 'Client', cell: (k) => [k.clientName || '', ' ', h('code', {}, k.userId)] },
      { title: 'Key', cell: (k) => h('code', { class: 'masked' }, k.maskedKey) },
      { title: 'Status', cell: (k) => badge(k.status) },
      { title: 'May', cell: (k) => (k.scopes || []).map((x) => x.replace(/_/g, ' ')).join(', ') },
      { title: 'Calls today', cell: (k) => k.api_calls + (k.rate_limit ? ' / ' + k.rate_limit : '') },
      { title: 'Expires', cell: (k) => (k.expiresAt ? when(k.expiresAt) : 'never') },
      { title: '', label: 'Actions', cell: (k) => h('div', { class: 'row' },
        h('button', { type: 'button', class: 'small ghost', onclick: () => patch(k, { status: k.status === 'active' ? 'revoked' : 'active' }) }, k.status === 'active' ? 'Revoke' : 'Reactivate'),
        h('button', { type: 'button', class: 'small danger', onclick: () => confirmInline(slot, 'Delete the key “' + k.name + '” for good? Programs using it stop working.', 'Delete it', async () => {
          try { await api('DELETE', '/api/admin/apikeys?id=' + encodeURIComponent(k.id)); say(slot, 'ok', 'Deleted “' + k.name + '”.'); load(); }
          catch (e) { say(slot, 'error', sentence(e)); }
        }) }, 'Delete')) },
    ], rows, 'No API key yet.'));
  };
  const patch = async (k, change) => {
    try { await api('PATCH', '/api/admin/apikeys', { id: k.id, ...change }); say(slot, 'ok', (change.status === 'revoked' ? 'Revoked “' : 'Reactivated “') + k.name + '”.'); load(); }
    catch (e) { say(slot, 'error', sentence(e)); }
  };
  api('GET', '/api/admin/users').then((u) => mount(userIds, usersList('user-ids', u)), () => {});
  const userId = h('input', { name: 'userId', required: true, list: 'user-ids', placeholder: 'alice' });
  const name = h('input', { name: 'name', required: true, placeholder: 'Production server' });
  const expires = h('input', { name: 'expiresAt', type: 'date' });
  const scopeNames = { send_text: 'send text', send_media: 'send media', send_bulk: 'send campaigns', read_messages: 'read messages' };
  const scopes = Object.keys(scopeNames).map((s) => h('label', { class: 'check' }, h('input', { type: 'checkbox', value: s, checked: true }), scopeNames[s]));
  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'Create a key'), userIds,
      form({ id: 'key-form', class: 'inline' }, [field('For user id', userId), field('Name', name), field('Expires (optional)', expires),
        h('fieldset', {}, h('legend', {}, 'Scopes'), scopes), h('button', { type: 'submit' }, 'Create key')], async () => {
        const picked = scopes.map((l) => l.firstChild).filter((i) => i.checked).map((i) => i.value);
        if (!picked.length) { say(slot, 'error', 'Pick at least one thing the key may do.'); return; }
        const body = { userId: userId.value.trim(), name: name.value.trim(), scopes: picked };
        if (expires.value) body.expiresAt = expires.value;
        try {
          const r = await api('POST', '/api/admin/apikeys', body);
          showOnce(once, 'The new key for ' + (r.clientName || r.userId), r.rawKey, 'Copy it now and give it to the client: it is shown this once and cannot be read again. The list shows it masked.');
          name.value = '';
          say(slot, '', '');
          load();
        } catch (e) { say(slot, 'error', sentence(e)); }
      }), once),
    h('section', { class: 'card' }, h('h2', {}, 'Keys'), slot, list));
  load();
}

/** sessions: every messaging session; create one, assign one to a user. */
export function sessions(el) {
  const slot = h('div', { class: 'slot' });
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const userIds = h('div', {});
  let shown = '';
  const load = async (force) => {
    let rows;
    try { rows = await api('GET', '/api/admin/sessions'); } catch (e) { mount(list, notice('error', sentence(e))); return; }
    // The list refreshes by itself; it is left alone while unchanged or while someone types in it.
    const now = JSON.stringify(rows);
    if (force !== true && (now === shown || list.contains(document.activeElement))) return;
    shown = now;
    mount(list, table([
      { title: 'Name', cell: (s) => s.name },
      { title: 'Id', cell: (s) => h('code', {}, s.id) },
      { title: 'Status', cell: (s) => [badge(s.status), s.statusReason ? ' ' + s.statusReason : ''] },
      { title: 'Phone', cell: (s) => [s.phone ? '+' + s.phone : '', s.kind === 'cloud' ? h('small', { class: 'muted' }, ' Cloud API') : ''] },
      { title: 'Assigned to', cell: (s) => {
        const i = h('input', { value: s.assignedTo || '', list: 'user-ids', size: 12, placeholder: 'user id', 'aria-label': 'assign ' + s.name });
        const b = h('button', { type: 'button', class: 'small', onclick: async () => {
          try { await api('POST', '/api/admin/sessions/assign', { sessionId: s.id, userId: i.value.trim() }); say(slot, 'ok', 'Assigned “' + s.name + '” to ' + i.value.trim() + '.'); load(true); }
          catch (e) { say(slot, 'error', sentence(e)); }
        } }, 'Assign');
        return h('div', { class: 'row' }, i, b, s.clientName ? h('small', {}, s.clientName) : null);
      } },
      { title: 'Last activity', cell: (s) => when(s.lastActivity) },
    ], rows, 'No session yet. Clients create theirs by linking a phone; admins can create one here.'));
  };
  api('GET', '/api/admin/users').then((u) => mount(userIds, usersList('user-ids', u)), () => {});
  const name = h('input', { name: 'sessionName', required: true, placeholder: 'support line' });
  const assign = h('input', { name: 'assignToUserId', list: 'user-ids', placeholder: 'optional' });
  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'Create a session'), userIds,
      form({ id: 'session-form', class: 'inline' }, [field('Name', name), field('Assign to user id', assign), h('button', { type: 'submit' }, 'Create')], async () => {
        const body = { sessionName: name.value.trim() };
        if (assign.value.trim()) body.assignToUserId = assign.value.trim();
        try { await api('POST', '/api/admin/sessions/create', body); say(slot, 'ok', 'Created “' + body.sessionName + '”.'); name.value = assign.value = ''; load(true); }
        catch (e) { say(slot, 'error', sentence(e)); }
      })),
    h('section', { class: 'card' }, h('h2', {}, 'Sessions'), slot, list));
  load();
  const t = setInterval(load, 5000);
  return () => clearInterval(t);
}

// cluster is the cluster's screen (a node of a cluster only): its nodes, and who owns each
// partition, as the node answering sees them (GET /api/admin/cluster), refreshed every 3 s.
export function cluster(el) {
  const nodes = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const parts = h('div', {});
  const load = async () => {
    let c;
    try { c = await api('GET', '/api/admin/cluster'); } catch (e) { mount(nodes, notice('error', sentence(e))); return; }
    if (!c.cluster) { mount(nodes, notice('info', 'This gateway runs as a single node.')); mount(parts); return; }
    mount(nodes,
      h('p', { class: 'muted' }, 'As node ', h('code', {}, c.node), ' sees it.'),
      table([
        { title: 'Node', cell: (n) => h('code', {}, n.id) },
        { title: 'State', cell: (n) => (n.alive ? badge('active', 'Up') : badge('failed', 'Gone')) },
        { title: 'Partitions', cell: (n) => String(n.partitions) },
        { title: 'Sessions', cell: (n) => String(n.sessions) },
      ], c.nodes, 'No node heartbeats.'));
    // Partitions grouped by owner; those without one are being handed over.
    const by = new Map();
    for (const p of c.partitions) {
      const k = p.owner || '';
      if (!by.has(k)) by.set(k, []);
      by.get(k).push(p.id);
    }
    const rows = [...by.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([owner, ids]) => ({ owner, ids }));
    mount(parts, table([
      { title: 'Owner', cell: (r) => (r.owner ? h('code', {}, r.owner) : badge('pending', 'Handing over')) },
      { title: 'Count', cell: (r) => String(r.ids.length) },
      { title: 'Partitions', cell: (r) => h('small', {}, r.ids.join(' ')) },
    ], rows, 'No partition yet.'));
  };
  mount(el,
    h('section', { class: 'card' }, h('h2', {}, 'Nodes'), nodes),
    h('section', { class: 'card' }, h('h2', {}, 'Partitions'), parts));
  load();
  const t = setInterval(load, 3000);
  return () => clearInterval(t);
}
