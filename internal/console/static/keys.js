// Keys: the client keys issued through the admin API (GET /admin/keys),
// newest first and paged, each with its budget's spend (GET /admin/budgets).
// An admin token may issue a key (POST /admin/keys), rotate one
// (POST /admin/keys/{id}/rotate) and revoke one (DELETE /admin/keys/{id});
// a read token is not shown those controls (GET /admin/whoami says which
// token this is). A new secret is shown once, in this view only: it is in
// no URL, no storage and no later answer, so a reload loses it for good.
import { api, send, AuthError, ApiError } from './api.js';
import { h, setText, setAttr, reconcile, swapIfChanged, badge, fmtNum, fmtTime, fmtUSD, screenHash } from './dom.js';

const LIMITS = ['25', '50', '100'];
const PRIORITIES = ['interactive', 'foreground', 'background', 'maintenance'];
const PERS = ['day', 'week', 'month', 'total'];
const COLS = 10;

// The create form's controls, by the body member (the API's `param`) they
// fill; budget.usd and budget.per are the budget's two halves.
const FIELDS = [
  ['name', 'Name'], ['team', 'Team'], ['models', 'Models'], ['priority', 'Highest priority'],
  ['max_concurrency', 'Max concurrency'], ['requests_per_minute', 'Requests per minute'],
  ['tokens_per_minute', 'Tokens per minute'], ['budget.usd', 'Budget (USD)'], ['budget.per', 'Budget per'],
  ['expires_at', 'Expires at'], ['cost_in_usage', 'Cost in usage'],
];

const fieldId = (param) => `k-${param.replace('.', '-')}`;

// keyState is what a key is now: revoked, expired, rotating (its old
// secret still works until previous_expires_at) or active.
export function keyState(k, now = Date.now()) {
  if (k.revoked_at) return 'revoked';
  if (k.expires_at && new Date(k.expires_at).getTime() <= now) return 'expired';
  if (k.previous_expires_at && new Date(k.previous_expires_at).getTime() > now) return 'rotating';
  return 'active';
}

function limitsText(k) {
  const parts = [];
  if (k.max_concurrency) parts.push(`${fmtNum(k.max_concurrency)} concurrent`);
  if (k.requests_per_minute) parts.push(`${fmtNum(k.requests_per_minute)} req/min`);
  if (k.tokens_per_minute) parts.push(`${fmtNum(k.tokens_per_minute)} tok/min`);
  return `${k.priority || 'interactive'}${parts.length ? ` · ${parts.join(' · ')}` : ''}`;
}

function budgetText(k, spend) {
  if (!k.budget) return '–';
  let t = `${fmtUSD(k.budget.usd)} / ${k.budget.per}`;
  if (spend) t += ` · spent ${fmtUSD(spend.spent_usd)} · left ${fmtUSD(spend.remaining_usd)}`;
  return t;
}

export class KeysView {
  constructor(route) {
    this.title = 'Keys';
    this.heading = h('h1', { tabindex: '-1', text: 'Keys' });
    this.params = route.params;
    this.role = ''; // unknown until /admin/whoami answers: no write control yet
    this.keys = new Map(); // id -> the record listed
    this.requestRefresh = () => {}; // set by the shell

    this.secret = h('section', { id: 'key-secret', class: 'secret', 'aria-labelledby': 'key-secret-h', hidden: true });

    this.createSec = this.buildCreate();

    this.inputs = {
      team: h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off' }),
      revoked: h('select', {}, h('option', { value: '', text: 'any' }),
        h('option', { value: 'false', text: 'not revoked' }), h('option', { value: 'true', text: 'revoked' })),
      limit: h('select', {}, LIMITS.map((n) => h('option', { value: n, text: n }))),
    };
    const ff = (name, label, control) => {
      control.id = `kf-${name}`;
      control.name = name;
      return h('div', {}, h('label', { for: control.id, text: label }), control);
    };
    this.filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter keys' },
      ff('team', 'Team', this.inputs.team), ff('revoked', 'Revoked', this.inputs.revoked),
      ff('limit', 'Rows', this.inputs.limit), h('div', {}, h('button', { type: 'submit', text: 'Apply filters' })));
    this.filters.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const q = new URLSearchParams();
      if (this.inputs.team.value.trim()) q.set('team', this.inputs.team.value.trim());
      if (this.inputs.revoked.value) q.set('revoked', this.inputs.revoked.value);
      if (this.inputs.limit.value !== '50') q.set('limit', this.inputs.limit.value);
      location.hash = screenHash('keys', q);
    });
    this.fillFilters(true);

    this.note = h('p', { class: 'section-note', id: 'keys-note', 'aria-live': 'off' });
    this.error = h('p', { class: 'error', id: 'keys-error', role: 'alert', hidden: true });
    this.tbody = h('tbody');
    const cols = [['Name'], ['Team'], ['Hint'], ['Models'], ['Priority and limits'], ['Budget'], ['Expires'],
      ['State'], ['Created'], ['Actions']];
    const tableEl = h('table', { id: 'keys-table' },
      h('caption', { class: 'visually-hidden', text: 'Client keys issued through the admin API, newest first' }),
      h('thead', {}, h('tr', {}, cols.map(([l]) => h('th', { scope: 'col', text: l })))),
      this.tbody);
    this.newest = h('button', { type: 'button', text: 'Newest', onclick: () => this.page('') });
    this.older = h('button', { type: 'button', text: 'Older', onclick: () => this.page(this.nextBefore) });
    this.nextBefore = null;

    this.rotateDlg = this.buildRotate();
    this.revokeDlg = this.buildRevoke();

    this.el = h('div', { class: 'view-keys' }, this.heading, this.secret, this.createSec,
      h('h2', { id: 'keys-list-h', text: 'Issued keys' }), this.filters, this.note, this.error,
      h('div', { class: 'table-wrap' }, tableEl),
      h('nav', { class: 'pager', 'aria-label': 'Pages' }, this.newest, this.older),
      this.rotateDlg.el, this.revokeDlg.el);
  }

  // buildCreate is the form that issues a key; hidden from a read token.
  buildCreate() {
    const c = {};
    c.name = h('input', { type: 'text', required: true, spellcheck: 'false', autocomplete: 'off', maxlength: 128 });
    c.team = h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off' });
    c.models = h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'every model' });
    c.priority = h('select', {}, PRIORITIES.map((p) => h('option', { value: p, text: p })));
    for (const k of ['max_concurrency', 'requests_per_minute', 'tokens_per_minute']) {
      c[k] = h('input', { type: 'number', step: '1', inputmode: 'numeric', placeholder: 'none' });
    }
    c['budget.usd'] = h('input', { type: 'number', step: 'any', inputmode: 'decimal', placeholder: 'none' });
    c['budget.per'] = h('select', {}, PERS.map((p) => h('option', { value: p, text: p })));
    c.expires_at = h('input', { type: 'datetime-local' });
    c.cost_in_usage = h('input', { type: 'checkbox' });
    this.create = c;
    this.fieldErrors = {};
    const hints = {
      models: 'Comma-separated names or globs (gpt-4o*); empty for every model.',
      expires_at: 'Local time; empty for never.',
      cost_in_usage: 'Answers carry usage.cost.',
    };
    const fields = FIELDS.map(([param, label]) => {
      const el = c[param];
      el.id = fieldId(param);
      el.name = param;
      const err = h('span', { class: 'field-error', id: `${el.id}-error`, hidden: true });
      this.fieldErrors[param] = err;
      const described = [hints[param] ? `${el.id}-hint` : null, err.id].filter(Boolean).join(' ');
      el.setAttribute('aria-describedby', described);
      const wrap = h('div', { class: param === 'cost_in_usage' ? 'check' : null },
        h('label', { for: el.id, text: label }), el,
        hints[param] ? h('span', { class: 'field-hint', id: `${el.id}-hint`, text: hints[param] }) : null, err);
      return wrap;
    });
    this.createError = h('p', { class: 'error', id: 'key-create-error', role: 'alert', hidden: true });
    this.createBtn = h('button', { type: 'submit', id: 'key-create', text: 'Issue key' });
    const form = h('form', { class: 'filters key-form', id: 'key-form', 'aria-labelledby': 'key-create-h', novalidate: true },
      fields, h('div', {}, this.createBtn));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.submitCreate(form);
    });
    return h('section', { id: 'key-create-section', 'aria-labelledby': 'key-create-h', hidden: true },
      h('h2', { id: 'key-create-h', text: 'Issue a key' }), form, this.createError);
  }

  clearFieldErrors() {
    for (const [param, err] of Object.entries(this.fieldErrors)) {
      err.hidden = true;
      setText(err, '');
      this.create[param].removeAttribute('aria-invalid');
    }
    this.createError.hidden = true;
    setText(this.createError, '');
  }

  // showCreateError puts a refused write's message next to its field when
  // the API names one (400 with param), else under the form.
  showCreateError(err) {
    const param = err instanceof ApiError ? err.param : '';
    const target = this.fieldErrors[param] || (param.startsWith('budget') ? this.fieldErrors['budget.usd'] : null);
    if (target) {
      target.hidden = false;
      setText(target, err.message);
      const input = this.create[param] || this.create['budget.usd'];
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    this.createError.hidden = false;
    setText(this.createError, writeMessage(err));
  }

  createBody() {
    const c = this.create;
    const body = { name: c.name.value.trim() };
    if (c.team.value.trim()) body.team = c.team.value.trim();
    const models = c.models.value.split(',').map((m) => m.trim()).filter(Boolean);
    if (models.length) body.models = models;
    body.priority = c.priority.value;
    for (const k of ['max_concurrency', 'requests_per_minute', 'tokens_per_minute']) {
      if (c[k].value !== '') body[k] = Number(c[k].value);
    }
    if (c['budget.usd'].value !== '') body.budget = { usd: Number(c['budget.usd'].value), per: c['budget.per'].value };
    if (c.cost_in_usage.checked) body.cost_in_usage = true;
    if (c.expires_at.value) {
      const d = new Date(c.expires_at.value);
      body.expires_at = Number.isNaN(d.getTime()) ? c.expires_at.value : d.toISOString();
    }
    return body;
  }

  async submitCreate(form) {
    this.clearFieldErrors();
    if (!this.create.name.value.trim()) {
      this.showCreateError(new ApiError(400, 'A name is required.', 'invalid_request', 'name'));
      return;
    }
    this.createBtn.disabled = true;
    try {
      const k = await send('POST', '/admin/keys', this.createBody());
      form.reset();
      this.showSecret(k, 'issued');
      this.requestRefresh();
    } catch (err) {
      this.showCreateError(err);
    } finally {
      this.createBtn.disabled = false;
    }
  }

  // showSecret shows a key's new secret, once: it lives in this element
  // until the operator dismisses it or leaves the screen.
  showSecret(k, how) {
    const value = h('code', { id: 'key-secret-value', class: 'secret-value', text: k.key });
    const status = h('span', { id: 'key-secret-status', class: 'muted', 'aria-live': 'polite' });
    const copy = h('button', { type: 'button', id: 'key-secret-copy', text: 'Copy' });
    copy.addEventListener('click', () => copySecret(value, status));
    const done = h('button', { type: 'button', id: 'key-secret-done', text: 'Done: hide it' });
    done.addEventListener('click', () => this.hideSecret());
    const title = h('h2', { id: 'key-secret-h', tabindex: '-1',
      text: how === 'rotated' ? `The new secret of ${k.name}` : `The secret of ${k.name}` });
    this.secret.replaceChildren(title,
      h('p', { class: 'warn' }, h('strong', { text: 'Copy it now: it will not be shown again.' }),
        ' The gateway keeps only its digest; a lost secret cannot be recovered, only replaced by rotating the key.' +
        (how === 'rotated' && k.previous_expires_at ? ` The old secret works until ${fmtTime(k.previous_expires_at)}.` : '')),
      h('p', { class: 'secret-row' }, value, ' ', copy, ' ', done, ' ', status));
    this.secret.dataset.keyId = k.id;
    this.secret.hidden = false;
    title.focus();
  }

  hideSecret() {
    this.secret.replaceChildren();
    delete this.secret.dataset.keyId;
    this.secret.hidden = true;
    this.heading.focus();
  }

  buildRotate() {
    const grace = h('input', { type: 'text', id: 'key-rotate-grace', value: '24h', spellcheck: 'false', autocomplete: 'off',
      'aria-describedby': 'key-rotate-grace-hint key-rotate-error' });
    const error = h('p', { class: 'error', id: 'key-rotate-error', role: 'alert', hidden: true });
    const text = h('p', { id: 'key-rotate-text' });
    const ok = h('button', { type: 'submit', id: 'key-rotate-ok', text: 'Rotate' });
    const cancel = h('button', { type: 'button', id: 'key-rotate-cancel', text: 'Cancel' });
    const form = h('form', { method: 'dialog' },
      h('h2', { id: 'key-rotate-h', text: 'Rotate key' }), text,
      h('div', { class: 'dlg-field' }, h('label', { for: grace.id, text: 'Grace for the old secret' }), grace,
        h('span', { class: 'field-hint', id: 'key-rotate-grace-hint', text: 'A Go duration: 24h, 30m; 0s ends the old secret now; at most 720h.' })),
      error, h('div', { class: 'dlg-buttons' }, ok, cancel));
    const el = h('dialog', { id: 'key-rotate', 'aria-labelledby': 'key-rotate-h' }, form);
    const d = { el, grace, error, text, ok, id: '', opener: null };
    cancel.addEventListener('click', () => el.close());
    el.addEventListener('close', () => { if (d.opener && d.opener.isConnected) d.opener.focus(); });
    confirmed(d, form, 'submit', ok,
      () => send('POST', `/admin/keys/${encodeURIComponent(d.id)}/rotate`, { grace: grace.value.trim() || '24h' }),
      (k) => {
        this.showSecret(k, 'rotated');
        this.requestRefresh();
      });
    return d;
  }

  openRotate(k, opener) {
    const d = this.rotateDlg;
    d.id = k.id;
    d.opener = opener;
    d.grace.value = '24h';
    d.error.hidden = true;
    setText(d.text, `Issue a new secret for ${k.name} (${k.hint}). The current one keeps working for the grace, then stops.`);
    d.el.showModal();
    d.grace.focus();
    d.grace.select();
  }

  buildRevoke() {
    const error = h('p', { class: 'error', id: 'key-revoke-error', role: 'alert', hidden: true });
    const text = h('p', { id: 'key-revoke-text' });
    const ok = h('button', { type: 'button', id: 'key-revoke-ok', class: 'danger', text: 'Revoke' });
    const cancel = h('button', { type: 'button', id: 'key-revoke-cancel', text: 'Cancel' });
    const el = h('dialog', { id: 'key-revoke', 'aria-labelledby': 'key-revoke-h', 'aria-describedby': 'key-revoke-text' },
      h('h2', { id: 'key-revoke-h', text: 'Revoke key?' }), text, error, h('div', { class: 'dlg-buttons' }, cancel, ok));
    const d = { el, error, text, id: '', opener: null };
    cancel.addEventListener('click', () => el.close());
    el.addEventListener('close', () => { if (d.opener && d.opener.isConnected) d.opener.focus(); });
    confirmed(d, ok, 'click', ok, () => send('DELETE', `/admin/keys/${encodeURIComponent(d.id)}`), () => {
      this.heading.focus();
      this.requestRefresh();
    });
    return d;
  }

  openRevoke(k, opener) {
    const d = this.revokeDlg;
    d.id = k.id;
    d.opener = opener;
    d.error.hidden = true;
    setText(d.text, `Revoke ${k.name} (${k.hint})? Its secrets stop working on every replica within a second. ` +
      'This cannot be undone: the name can be issued again as a new key.');
    d.el.showModal();
    // The safe choice has the focus: Enter does not revoke.
    d.el.querySelector('#key-revoke-cancel').focus();
  }

  fillFilters(all) {
    for (const k of ['team', 'revoked', 'limit']) {
      const el = this.inputs[k];
      if (!all && document.activeElement === el) continue;
      const v = this.params.get(k) || (k === 'limit' ? '50' : '');
      if (el.value !== v) el.value = v;
    }
  }

  page(before) {
    const q = new URLSearchParams(this.params);
    if (before) q.set('before', before);
    else q.delete('before');
    location.hash = screenHash('keys', q);
  }

  update(route) {
    this.params = route.params;
    this.fillFilters(false);
    return true;
  }

  async refresh(signal) {
    const q = new URLSearchParams();
    for (const k of ['team', 'revoked', 'before']) {
      const v = this.params.get(k);
      if (v) q.set(k, v);
    }
    q.set('limit', this.params.get('limit') || '50');
    let list;
    let budgets;
    try {
      [list, budgets] = await Promise.all([
        api(`/admin/keys?${q}`, signal),
        // Spend is a detail: without it the list still shows.
        api('/admin/budgets', signal).catch((err) => {
          if (err instanceof AuthError || err.name === 'AbortError') throw err;
          return null;
        }),
        this.loadRole(signal),
      ]);
    } catch (err) {
      this.showError(err);
      throw err;
    }
    this.error.hidden = true;
    const spend = new Map();
    for (const b of (budgets && budgets.budgets) || []) {
      if (b.owner && b.owner.kind === 'client') spend.set(`${b.owner.name}/${b.window}`, b);
    }
    const rows = list.keys || [];
    this.keys = new Map(rows.map((k) => [k.id, k]));
    this.nextBefore = list.next_before || null;
    this.older.disabled = !this.nextBefore;
    this.newest.disabled = !this.params.get('before');
    const filters = ['team', 'revoked'].filter((k) => this.params.get(k)).map((k) => `${k} ${this.params.get(k)}`);
    setText(this.note, `${rows.length} key${rows.length === 1 ? '' : 's'}` +
      `${this.params.get('before') ? ', an older page' : ', newest first'}` +
      `${filters.length ? ' · ' + filters.join(', ') : ''}${this.nextBefore ? '' : ' · last page'}` +
      `${this.role === 'read' ? ' · read-only token: issuing, rotating and revoking need GATEWAY_ADMIN_TOKEN' : ''}`);
    if (rows.length === 0) {
      this.tbody.replaceChildren(h('tr', { 'data-key': '' }, h('td', { colspan: COLS, class: 'muted', text: 'No keys match.' })));
      return;
    }
    const now = Date.now();
    reconcile(this.tbody, rows, (k) => k.id, (k) => h('tr', { 'data-id': k.id }),
      (tr, k) => this.updateRow(tr, k, k.budget ? spend.get(`${k.name}/${k.budget.per}`) : null, now));
  }

  // loadRole asks whether this token may write. A gateway without
  // /admin/whoami (404) predates the read token: its token is the admin's.
  async loadRole(signal) {
    let role;
    try {
      role = (await api('/admin/whoami', signal)).role;
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404) throw err;
      role = 'admin';
    }
    this.role = role;
    this.createSec.hidden = role !== 'admin';
    this.el.dataset.role = role;
    // A read token has no action: no empty Actions column either.
    this.tbody.parentElement.classList.toggle('read-only', role !== 'admin');
  }

  updateRow(tr, k, spend, now) {
    while (tr.children.length < COLS) tr.append(h('td'));
    const c = tr.children;
    const state = keyState(k, now);
    setText(c[0], k.name);
    setText(c[1], k.team || '–');
    c[2].className = 'mono';
    setText(c[2], k.hint);
    c[3].className = 'wrap-s';
    setText(c[3], k.models && k.models.length ? k.models.join(', ') : 'every model');
    c[4].className = 'wrap-s';
    setText(c[4], limitsText(k));
    c[5].className = 'wrap-s budget';
    setText(c[5], budgetText(k, spend));
    setText(c[6], k.expires_at ? fmtTime(k.expires_at) : 'never');
    swapIfChanged(c[7], `${state}|${k.previous_expires_at}`, () => {
      const out = [badge(state)];
      if (state === 'rotating') out.push(h('span', { class: 'muted', text: ` old secret until ${fmtTime(k.previous_expires_at)}` }));
      if (state === 'revoked') out.push(h('span', { class: 'muted', text: ` ${fmtTime(k.revoked_at)}` }));
      return out;
    });
    setText(c[8], fmtTime(k.created_at));
    // Write controls only for the admin token, and none on a revoked key
    // (it cannot change: issue a new one).
    swapIfChanged(c[9], `${this.role}|${state === 'revoked'}`, () => {
      if (this.role !== 'admin' || state === 'revoked') return [];
      const rot = h('button', { type: 'button', class: 'rotate', 'aria-label': `Rotate ${k.name}`, text: 'Rotate' });
      rot.addEventListener('click', () => this.openRotate(this.keys.get(k.id) || k, rot));
      const rev = h('button', { type: 'button', class: 'revoke danger', 'aria-label': `Revoke ${k.name}`, text: 'Revoke' });
      rev.addEventListener('click', () => this.openRevoke(this.keys.get(k.id) || k, rev));
      return [rot, ' ', rev];
    });
    setAttr(tr, 'data-name', k.name);
    setAttr(tr, 'data-state', state);
  }

  showError(err) {
    if (err.name === 'AbortError') return;
    this.error.hidden = false;
    setText(this.error, err.status === 404
      ? `Keys are not available from this gateway (${err.message}).`
      : `Could not load keys: ${err.message}`);
  }
}

// writeMessage says why a write was refused; a read token's 403 says so
// in the gateway's words.
// confirmed runs a dialog's write when its confirm control fires (a form's
// submit, a button's click): on success the dialog closes and after gets
// the write's answer; a refused write is shown in the dialog, which stays.
function confirmed(d, target, event, ok, write, after) {
  target.addEventListener(event, async (ev) => {
    ev.preventDefault();
    d.error.hidden = true;
    ok.disabled = true;
    try {
      const v = await write();
      d.opener = null;
      d.el.close();
      after(v);
    } catch (err) {
      d.error.hidden = false;
      setText(d.error, writeMessage(err));
    } finally {
      ok.disabled = false;
    }
  });
}

function writeMessage(err) {
  if (err instanceof AuthError) return `${err.message} Sign in again.`;
  if (err instanceof ApiError && err.code === 'read_only_token') return `Refused: ${err.message}`;
  return `Failed: ${err.message}`;
}

// copySecret copies the secret to the clipboard; where the clipboard API
// is missing or refused (plain http from another host, no permission), it
// selects the text so Ctrl+C copies it.
async function copySecret(el, status) {
  try {
    if (!navigator.clipboard || !navigator.clipboard.writeText) throw new Error('no clipboard API');
    await navigator.clipboard.writeText(el.textContent);
    setText(status, 'Copied to the clipboard.');
  } catch {
    const range = document.createRange();
    range.selectNodeContents(el);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    setText(status, 'Selected: press Ctrl+C (⌘C on a Mac) to copy it.');
  }
}
