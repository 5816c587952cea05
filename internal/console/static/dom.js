// DOM and formatting helpers. Everything is built with createElement and
// textContent: no HTML string from the API ever reaches innerHTML.

// The SVG namespace name; an identifier the browser never fetches.
export const SVG_NS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') el.textContent = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h builds an HTML element: h('a', {href: '#/x', class: 'y'}, 'text', child).
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s builds an SVG element.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

// setText changes a node's text only when it differs, so an unchanged
// refresh touches nothing (no layout, no screen reader chatter).
export function setText(el, text) {
  const t = text === null || text === undefined ? '' : String(text);
  if (el.textContent !== t) el.textContent = t;
}

// setAttr likewise for an attribute; null removes it.
export function setAttr(el, name, value) {
  if (value === null || value === undefined) {
    if (el.hasAttribute(name)) el.removeAttribute(name);
  } else if (el.getAttribute(name) !== String(value)) {
    el.setAttribute(name, String(value));
  }
}

// reconcile makes container's children match items in order, reusing the
// element of each key: create(item) makes a new one, update(el, item)
// refreshes it. Elements that stay are moved only when out of place, so the
// focused link of a row that is still listed keeps its focus.
export function reconcile(container, items, key, create, update) {
  const keys = items.map((item) => String(key(item)));
  const wanted = new Set(keys);
  const old = new Map();
  // Drop the elements that go first, so those that stay need no move.
  for (const el of Array.from(container.children)) {
    const k = el.dataset.key;
    if (k === undefined || !wanted.has(k) || old.has(k)) el.remove();
    else old.set(k, el);
  }
  let cursor = container.firstElementChild;
  items.forEach((item, i) => {
    let el = old.get(keys[i]);
    if (!el) {
      el = create(item);
      el.dataset.key = keys[i];
    }
    update(el, item);
    if (el === cursor) {
      cursor = cursor.nextElementSibling;
    } else {
      container.insertBefore(el, cursor);
    }
  });
}

// swapIfChanged replaces el's content only when its signature changed.
export function swapIfChanged(el, signature, make) {
  if (el.dataset.sig === signature) return false;
  el.dataset.sig = signature;
  el.replaceChildren(...[].concat(make()));
  return true;
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

export function fmtSeconds(sec) {
  if (sec === null || sec === undefined) return '–';
  return fmtMs(sec * 1000);
}

export function fmtNum(n) {
  if (n === null || n === undefined) return '–';
  return Number(n).toLocaleString('en-US');
}

// fmtUSD shows a cost in dollars: cents from a dollar up; below, four
// significant digits, so a request of a few hundred tokens does not read
// $0.00 (0.0045 is "$0.0045", 1.25e-6 "$0.00000125"). Unknown (null: an
// unpriced model, or no usage) is a dash; an estimate says so.
export function fmtUSD(x, estimated = false) {
  if (x === null || x === undefined || Number.isNaN(Number(x))) return '–';
  const v = Number(x);
  const a = Math.abs(v);
  const digits = a >= 1 || a === 0 ? 2 : Math.min(12, Math.max(2, 3 - Math.floor(Math.log10(a))));
  const t = `$${v.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: digits })}`;
  return estimated ? `${t} (est.)` : t;
}

export function fmtPct(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return '–';
  return `${(x * 100).toFixed(x > 0 && x < 0.1 ? 1 : 0)}%`;
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

// fmtTime shows a timestamp in local time, with the date when not today.
export function fmtTime(iso, withMs = false) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  let t = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (withMs) t += `.${pad(d.getMilliseconds(), 3)}`;
  const now = new Date();
  if (d.toDateString() !== now.toDateString()) {
    t = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${t}`;
  }
  return t;
}

// fmtIn says how far a moment is from now ("in 4 s", "3 s ago").
export function fmtIn(iso) {
  if (!iso) return '';
  const ms = new Date(iso).getTime() - Date.now();
  if (Number.isNaN(ms)) return '';
  const sec = Math.round(Math.abs(ms) / 1000);
  return ms >= 0 ? `in ${sec} s` : `${sec} s ago`;
}

// parseGoDuration reads a Go time.Duration string ("1h0m0s", "1m0s", "250ms").
export function parseGoDuration(str) {
  if (typeof str !== 'string') return NaN;
  const units = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, us: 1e-3, 'µs': 1e-3, ns: 1e-6 };
  let total = 0;
  let matched = '';
  for (const m of str.matchAll(/([0-9.]+)(ms|us|µs|ns|h|m|s)/g)) {
    total += parseFloat(m[1]) * units[m[2]];
    matched += m[0];
  }
  return matched.length > 0 && matched.length === str.replace(/^-/, '').length ? total : NaN;
}

// screenHash is the location hash of a console screen with params, the
// empty ones left out: "#/requests?status=failed".
export function screenHash(screen, params) {
  const q = new URLSearchParams();
  for (const [k, v] of params) if (v) q.set(k, v);
  const qs = q.toString();
  return `#/${screen}${qs ? `?${qs}` : ''}`;
}

// badge is a status word with its colour class: the word carries the
// meaning, the colour only repeats it.
export function badge(status, text = status) {
  return h('span', { class: `badge s-${status}`, text });
}
