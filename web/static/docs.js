// docs.js: the API reference at /docs, rendered in the browser from /api/openapi.json (served
// by the gateway itself, so it works offline). Schemas are shown as compact type trees.
import { h, mount } from './lib.js';

const root = document.getElementById('app');
let doc = null;

function deref(o) {
  let seen = 0;
  while (o && o.$ref && seen++ < 20) {
    o = o.$ref.slice(2).split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~')).reduce((a, k) => (a ? a[k] : undefined), doc);
  }
  return o || {};
}

function refName(o) { return o && o.$ref ? o.$ref.split('/').pop() : ''; }

/** md renders the little markdown the descriptions use: `code` and **bold**. */
function md(text) {
  const out = [];
  String(text || '').split(/(`[^`]+`|\*\*[^*]+\*\*)/).forEach((part) => {
    if (part.startsWith('`') && part.endsWith('`') && part.length > 1) out.push(h('code', {}, part.slice(1, -1)));
    else if (part.startsWith('**') && part.endsWith('**')) out.push(h('strong', {}, part.slice(2, -2)));
    else if (part) out.push(part);
  });
  return out;
}

function typeOf(s) {
  s = deref(s);
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  let t = Array.isArray(s.type) ? s.type.join(' | ') : s.type;
  if (!t && s.properties) t = 'object';
  if (t === 'array' && s.items) t = 'array of ' + (refName(s.items) || typeOf(s.items));
  if (s.format) t += ' (' + s.format + ')';
  return t || (s.oneOf || s.anyOf ? (s.oneOf || s.anyOf).map((x) => refName(x) || typeOf(x)).join(' | ') : 'any');
}

/** schema renders an object's properties as a list, nested one level per object. */
function schema(s, depth = 0) {
  const name = refName(s);
  s = deref(s);
  if (s.allOf) s = Object.assign({}, ...s.allOf.map(deref), { properties: Object.assign({}, ...s.allOf.map((x) => deref(x).properties || {}), s.properties || {}), required: [...s.allOf.flatMap((x) => deref(x).required || []), ...(s.required || [])] });
  if (s.type === 'array' && s.items) return h('div', {}, h('span', { class: 'muted' }, 'array of ' + (refName(s.items) || typeOf(s.items))), depth < 3 ? schema(s.items, depth + 1) : null);
  if (!s.properties) return h('span', { class: 'muted' }, (name ? name + ': ' : '') + typeOf(s));
  const req = new Set(s.required || []);
  return h('ul', { class: 'schema' }, Object.entries(s.properties).map(([k, v]) => {
    const d = deref(v);
    return h('li', {}, h('code', {}, k), req.has(k) ? h('span', { class: 'req' }, ' required') : null, ' ', h('span', { class: 'type' }, refName(v) || typeOf(v)),
      d.description ? h('span', { class: 'desc' }, ' — ', md(d.description)) : null,
      depth < 2 && (d.properties || (d.items && deref(d.items).properties)) ? schema(v, depth + 1) : null);
  }));
}

function example(content) {
  const mt = content && (content['application/json'] || Object.values(content)[0]);
  if (!mt) return null;
  const ex = mt.example !== undefined ? mt.example : mt.examples ? Object.values(mt.examples)[0].value : undefined;
  return h('div', {}, mt.schema ? schema(mt.schema) : null, ex !== undefined ? h('details', {}, h('summary', {}, 'Example'), h('pre', {}, JSON.stringify(ex, null, 2))) : null);
}

function operation(path, method, op, shared) {
  const params = [...(shared || []), ...(op.parameters || [])].map(deref).filter((p) => p.in !== 'header' || p.name !== 'X-Request-Id');
  const body = op.requestBody ? deref(op.requestBody) : null;
  const id = (method + path).replace(/[^a-zA-Z0-9]+/g, '-');
  return h('details', { class: 'op', id }, h('summary', {}, h('span', { class: 'method m-' + method }, method.toUpperCase()), h('code', { class: 'path' }, path), ' ', h('span', { class: 'sum' }, op.summary || '')),
    op.description ? h('p', {}, md(op.description)) : null,
    op.security && op.security.length === 0 ? h('p', { class: 'muted' }, 'No authentication.') : null,
    params.length ? [h('h4', {}, 'Parameters'), h('ul', { class: 'schema' }, params.map((p) => h('li', {}, h('code', {}, p.name), ' ', h('span', { class: 'type' }, p.in + ', ' + typeOf(p.schema || {})), p.required ? h('span', { class: 'req' }, ' required') : null, p.description ? h('span', { class: 'desc' }, ' — ', md(p.description)) : null)))] : null,
    body ? [h('h4', {}, 'Request body'), body.description ? h('p', {}, md(body.description)) : null, example(body.content)] : null,
    h('h4', {}, 'Responses'),
    Object.entries(op.responses || {}).map(([code, r]) => {
      r = deref(r);
      return h('div', { class: 'resp' }, h('strong', {}, code), ' ', md(r.description || ''), example(r.content));
    }));
}

async function boot() {
  try {
    const res = await fetch('/api/openapi.json');
    doc = await res.json();
  } catch (e) {
    mount(root, h('p', { class: 'notice error' }, 'The API description could not be loaded: ' + e.message + '.'));
    return;
  }
  const groups = new Map();
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const m of ['get', 'post', 'put', 'patch', 'delete']) {
      if (!item[m]) continue;
      const tag = (item[m].tags || ['other'])[0];
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push(operation(path, m, item[m], item.parameters));
    }
  }
  const search = h('input', { type: 'search', placeholder: 'Filter routes…', 'aria-label': 'Filter routes' });
  const body = h('div', {}, [...groups].map(([tag, ops]) => {
    const t = (doc.tags || []).find((x) => x.name === tag);
    return h('section', { class: 'tag' }, h('h2', { id: 'tag-' + tag.replace(/\W+/g, '-') }, tag), t && t.description ? h('p', { class: 'muted' }, md(t.description)) : null, ops);
  }));
  search.addEventListener('input', () => {
    const q = search.value.toLowerCase();
    for (const op of body.querySelectorAll('.op')) op.hidden = q && !op.querySelector('summary').textContent.toLowerCase().includes(q);
  });
  const info = doc.info || {};
  mount(root, h('header', {}, h('a', { class: 'brand', href: '/dashboard/' }, 'gateway'), h('span', { class: 'who' }, 'API reference ' + (info.version || ''))),
    h('main', { class: 'docs-main' }, h('h1', {}, info.title || 'API'), info.description ? h('p', {}, md(info.description)) : null,
      h('p', { class: 'muted' }, 'Rendered from ', h('a', { href: '/api/openapi.json' }, '/api/openapi.json'), '.'), search, body));
}

boot();
