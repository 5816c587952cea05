// Requests: the newest first, filtered by status, model, provider and
// client, paged by the list's next_before cursor.
import { api } from './api.js';
import { h, setText, setAttr, reconcile, badge, fmtMs, fmtNum, fmtTime, fmtUSD, screenHash } from './dom.js';

const FILTERS = ['status', 'model', 'provider', 'client'];
const STATUSES = ['success', 'failed', 'cancelled', 'pending'];
const LIMITS = ['25', '50', '100'];

function field(name, label, control) {
  control.id = `f-${name}`;
  control.name = name;
  return h('div', {}, h('label', { for: control.id, text: label }), control);
}

export class RequestsView {
  constructor(route) {
    this.title = 'Requests';
    this.heading = h('h1', { tabindex: '-1', text: 'Requests' });
    this.params = route.params;

    this.inputs = {
      status: h('select', {},
        h('option', { value: '', text: 'any' }),
        STATUSES.map((st) => h('option', { value: st, text: st }))),
      model: h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off' }),
      provider: h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off' }),
      client: h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off' }),
      limit: h('select', {}, LIMITS.map((n) => h('option', { value: n, text: n }))),
    };
    this.inputs.limit.value = '50';
    this.form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter requests' },
      field('status', 'Status', this.inputs.status),
      field('model', 'Model', this.inputs.model),
      field('provider', 'Provider', this.inputs.provider),
      field('client', 'Client', this.inputs.client),
      field('limit', 'Rows', this.inputs.limit),
      h('div', {}, h('button', { type: 'submit', text: 'Apply filters' })),
      h('div', {}, h('button', { type: 'button', text: 'Clear', onclick: () => this.clear() })));
    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      location.hash = screenHash('requests', this.formParams());
    });

    this.note = h('p', { class: 'section-note', id: 'requests-note', 'aria-live': 'off' });
    this.error = h('p', { class: 'error', role: 'alert', hidden: true });
    this.tbody = h('tbody');
    const cols = [['Created'], ['Request'], ['Model'], ['Route'], ['Client'], ['Status'], ['Code', 'num'],
      ['Error type'], ['Latency', 'num'], ['First byte', 'num'], ['Candidates', 'num'], ['Providers'],
      ['Tokens', 'num'], ['Cost', 'num'], ['Replica']];
    const table = h('table', { id: 'requests-table' },
      h('caption', { class: 'visually-hidden', text: 'Requests, newest first; each id links to its candidate timeline' }),
      h('thead', {}, h('tr', {}, cols.map(([l, c]) => h('th', { scope: 'col', class: c || null, text: l })))),
      this.tbody);
    this.newest = h('button', { type: 'button', text: 'Newest', onclick: () => this.page('') });
    this.older = h('button', { type: 'button', text: 'Older', onclick: () => this.page(this.nextBefore) });
    this.nextBefore = null;

    this.el = h('div', { class: 'view-requests' }, this.heading, this.form, this.note, this.error,
      h('div', { class: 'table-wrap' }, table),
      h('nav', { class: 'pager', 'aria-label': 'Pages' }, this.newest, this.older));
    this.fillForm(true);
  }

  formParams() {
    const q = new URLSearchParams();
    for (const k of FILTERS) {
      const v = this.inputs[k].value.trim();
      if (v) q.set(k, v);
    }
    if (this.inputs.limit.value !== '50') q.set('limit', this.inputs.limit.value);
    return q;
  }

  // fillForm shows the route's filters; a control the operator is typing in
  // is left alone.
  fillForm(all) {
    for (const k of [...FILTERS, 'limit']) {
      const el = this.inputs[k];
      if (!all && document.activeElement === el) continue;
      const v = this.params.get(k) || (k === 'limit' ? '50' : '');
      if (el.value !== v) el.value = v;
    }
  }

  clear() {
    for (const k of FILTERS) this.inputs[k].value = '';
    this.inputs.limit.value = '50';
    location.hash = '#/requests';
  }

  page(before) {
    const q = new URLSearchParams(this.params);
    if (before) q.set('before', before);
    else q.delete('before');
    location.hash = screenHash('requests', q);
  }

  update(route) {
    this.params = route.params;
    this.fillForm(false);
    return true;
  }

  async refresh(signal) {
    const q = new URLSearchParams();
    for (const k of [...FILTERS, 'before']) {
      const v = this.params.get(k);
      if (v) q.set(k, v);
    }
    q.set('limit', this.params.get('limit') || '50');
    let data;
    try {
      data = await api(`/admin/requests?${q}`, signal);
    } catch (err) {
      this.showError(err);
      throw err;
    }
    this.error.hidden = true;
    const rows = data.requests || [];
    this.nextBefore = data.next_before || null;
    this.older.disabled = !this.nextBefore;
    this.newest.disabled = !this.params.get('before');
    const filters = FILTERS.filter((k) => this.params.get(k)).map((k) => `${k} ${this.params.get(k)}`);
    setText(this.note, `${rows.length} request${rows.length === 1 ? '' : 's'}` +
      `${this.params.get('before') ? ', an older page' : ', newest first'}` +
      `${filters.length ? ' · ' + filters.join(', ') : ''}${this.nextBefore ? '' : ' · last page'}`);
    if (rows.length === 0) {
      this.tbody.replaceChildren(h('tr', { 'data-key': '' }, h('td', { colspan: 15, class: 'muted', text: 'No requests match.' })));
      return;
    }
    reconcile(this.tbody, rows, (r) => r.id, (r) => row(r), updateRow);
  }

  showError(err) {
    if (err.name === 'AbortError') return;
    this.error.hidden = false;
    setText(this.error, err.status === 501
      ? `The request list is not available from this gateway yet (${err.message}).`
      : `Could not load requests: ${err.message}`);
  }
}

function row(r) {
  const tr = h('tr', { 'data-id': r.id });
  for (let i = 0; i < 15; i++) tr.append(h('td'));
  const c = tr.children;
  c[1].append(h('a', { class: 'mono', href: `#/requests/${encodeURIComponent(r.id)}`, text: r.id }));
  for (const i of [6, 8, 9, 10, 12, 13]) c[i].className = 'num';
  // The id (36 characters), the error type and the provider chain may
  // break, so the fifteen columns fit a 1280 px window.
  c[13].classList.add('cost');
  c[1].className = 'id';
  for (const i of [7, 11]) c[i].className = 'wrap-s';
  return tr;
}

function updateRow(tr, r) {
  const c = tr.children;
  setText(c[0], fmtTime(r.created_at));
  setText(c[2], r.model);
  setText(c[3], r.route + (r.stream ? ' · stream' : ''));
  setText(c[4], r.client || '–');
  if (c[5].dataset.status !== r.status) {
    c[5].replaceChildren(badge(r.status));
    c[5].dataset.status = r.status;
  }
  setText(c[6], r.status_code ?? '–');
  setText(c[7], r.error_type || '–');
  setText(c[8], fmtMs(r.latency_ms));
  setText(c[9], fmtMs(r.first_byte_ms));
  setText(c[10], fmtNum(r.candidate_count));
  // A cache hit reached no provider: it says so, and what it saved, where
  // the providers go (a column that wraps); its cost is 0.
  setText(c[11], r.cache === 'hit' ? `cache hit, saved ${fmtUSD(r.saved_usd)}`
    : (r.providers || []).join(' → ') || '–');
  setText(c[12], fmtNum(r.total_tokens));
  // Null: unknown (an unpriced model, or no usage), not free.
  setText(c[13], fmtUSD(r.cost_usd, r.usage_estimated));
  setText(c[14], r.replica || '–');
  setAttr(tr, 'data-status', r.status);
  setAttr(tr, 'data-cache', r.cache || '');
}
