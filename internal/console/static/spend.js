// Spend: what the requests cost per team, client, model or provider over a
// window (GET /admin/spend), as stacked bars over time and a table, and
// every budget with what is left of it (GET /admin/budgets).
import { api, AuthError } from './api.js';
import { h, s, setText, setAttr, reconcile, swapIfChanged, fmtNum, fmtPct, fmtTime, fmtIn, fmtUSD, parseGoDuration } from './dom.js';
import { section, showSectionError, clearSectionError, table, cells } from './overview.js';

// The groupings and windows /admin/spend answers; the first is the default.
const GROUPS = [['team', 'Team'], ['client', 'Client'], ['model', 'Model'], ['provider', 'Provider']];
const WINDOWS = [['24h', 'last 24 hours', 24 * 3600e3], ['1h', 'last hour', 3600e3],
  ['7d', 'last 7 days', 7 * 24 * 3600e3], ['30d', 'last 30 days', 30 * 24 * 3600e3]];

// The chart has eight colours (.sp-0 to .sp-7): the seven costliest groups
// get one each, the others share the last. The table lists every group.
const COLOURS = 8;

// bucketLabel names a series bucket ("1h0m0s" is "1 h").
function bucketLabel(bucket) {
  const ms = parseGoDuration(bucket);
  if (!(ms > 0)) return bucket;
  if (ms % 86400e3 === 0) return `${ms / 86400e3} d`;
  if (ms % 3600e3 === 0) return `${ms / 3600e3} h`;
  if (ms % 60e3 === 0) return `${ms / 60e3} min`;
  return bucket;
}

// A budget with less than this share left is highlighted.
const LOW = 0.1;

function pick(params, name, list) {
  const v = params.get(name);
  return list.some(([k]) => k === v) ? v : list[0][0];
}

function field(name, label, control) {
  control.id = `f-${name}`;
  control.name = name;
  return h('div', {}, h('label', { for: control.id, text: label }), control);
}

// groupLabel names a group; requests without a team or client key are
// the empty group.
function groupLabel(by, g) {
  if (g) return g;
  return { team: '(no team)', client: '(no client key)' }[by] || '(none)';
}

function swatch(i) {
  return s('svg', { width: 14, height: 14, 'aria-hidden': 'true', class: 'swatch' }, s('rect', { width: 14, height: 14, class: `sp-${i}` }));
}

export class SpendView {
  constructor(route) {
    this.title = 'Spend';
    this.heading = h('h1', { tabindex: '-1', text: 'Spend' });
    this.by = pick(route.params, 'by', GROUPS);
    this.window = pick(route.params, 'window', WINDOWS);

    this.inputs = {
      by: h('select', {}, GROUPS.map(([v, l]) => h('option', { value: v, text: l }))),
      window: h('select', {}, WINDOWS.map(([v, l]) => h('option', { value: v, text: l }))),
    };
    this.form = h('form', { class: 'filters', 'aria-label': 'What the spend screen shows' },
      field('by', 'Group by', this.inputs.by),
      field('window', 'Window', this.inputs.window),
      h('div', {}, h('button', { type: 'submit', text: 'Show' })));
    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      location.hash = `#/spend?by=${encodeURIComponent(this.inputs.by.value)}&window=${encodeURIComponent(this.inputs.window.value)}`;
    });
    this.fillForm();

    this.cost = section('spend', 'Cost');
    this.chart = h('div', { id: 'spend-chart' });
    this.costTable = table('Cost per group over the window, costliest first', [
      ['Group'], ['Requests', 'num'], ['Input tokens', 'num'], ['Output tokens', 'num'], ['Cached tokens', 'num'],
      ['Cost', 'num'], ['Share', 'num'], ['Unpriced', 'num'], ['Cache hits', 'num'], ['Saved by the cache', 'num'],
    ]);
    this.costTable.wrap.firstChild.id = 'spend-table';
    this.cost.body.append(this.chart, this.costTable.wrap,
      h('p', { class: 'section-note', text: 'Unpriced: requests with usage but no price for their model; their cost is unknown and not in the sums.' }),
      h('p', { class: 'section-note', text: 'Cache hits: requests answered from the response cache, at no cost (counted in the requests); saved: what their answers cost when they were stored. A hit reaches no provider.' }));

    this.budgets = section('budgets', 'Budgets');
    this.budgetTable = table('Every configured budget and what is left of its current window', [
      ['Budget'], ['Window'], ['Limit', 'num'], ['Spent', 'num'], ['Reserved', 'num'], ['Remaining'], ['Resets'],
    ]);
    this.budgetTable.wrap.firstChild.id = 'budgets-table';
    this.budgets.body.append(this.budgetTable.wrap);

    this.el = h('div', { class: 'view-spend' }, this.heading, this.form, this.cost.el, this.budgets.el);
  }

  fillForm() {
    for (const [k, v] of [['by', this.by], ['window', this.window]]) {
      if (document.activeElement !== this.inputs[k] && this.inputs[k].value !== v) this.inputs[k].value = v;
    }
  }

  update(route) {
    this.by = pick(route.params, 'by', GROUPS);
    this.window = pick(route.params, 'window', WINDOWS);
    this.fillForm();
    return true;
  }

  async refresh(signal) {
    const parts = [
      [this.cost, () => api(`/admin/spend?by=${this.by}&window=${this.window}`, signal).then((d) => this.renderSpend(d))],
      [this.budgets, () => api('/admin/budgets', signal).then((d) => this.renderBudgets(d))],
    ];
    const results = await Promise.allSettled(parts.map(([, run]) => run()));
    let firstError = null;
    results.forEach((res, i) => {
      const sec = parts[i][0];
      if (res.status === 'fulfilled') {
        clearSectionError(sec);
        return;
      }
      const err = res.reason;
      if (err instanceof AuthError || err.name === 'AbortError') throw err;
      showSectionError(sec, err);
      firstError = firstError || err;
    });
    if (firstError && results.every((r) => r.status === 'rejected')) throw firstError;
  }

  renderSpend(d) {
    // An answer for another choice (the operator changed it meanwhile)
    // waits for the next refresh.
    if (d.by !== this.by || d.window !== this.window) return;
    const groups = d.groups || [];
    const total = groups.reduce((a, g) => a + g.cost_usd, 0);
    const requests = groups.reduce((a, g) => a + g.requests, 0);
    const unpriced = groups.reduce((a, g) => a + g.unpriced, 0);
    const hits = groups.reduce((a, g) => a + (g.cache_hits || 0), 0);
    const saved = groups.reduce((a, g) => a + (g.saved_usd || 0), 0);
    const win = WINDOWS.find(([k]) => k === d.window);
    const byLabel = GROUPS.find(([k]) => k === d.by)[1].toLowerCase();
    setText(this.cost.el.querySelector('h2'), `Cost by ${byLabel}, ${win[1]}`);
    setText(this.cost.note, `${fmtUSD(total)} over ${fmtNum(requests)} request${requests === 1 ? '' : 's'}` +
      `${unpriced ? ` · ${fmtNum(unpriced)} unpriced` : ''}` +
      `${hits ? ` · ${fmtNum(hits)} cache hit${hits === 1 ? '' : 's'} saved ${fmtUSD(saved)}` : ''} · since ${fmtTime(d.since)}, ${bucketLabel(d.bucket)} buckets`);
    setAttr(this.cost.el, 'data-total', String(total));
    // Groups come costliest first: the colour follows the rank.
    const colour = new Map(groups.map((g, i) => [g.group, Math.min(i, COLOURS - 1)]));
    swapIfChanged(this.chart, JSON.stringify(d), () => spendChart(d, win[2], colour, groups, total));
    if (groups.length === 0) {
      this.costTable.tbody.replaceChildren(h('tr', { 'data-key': '' }, h('td', { colspan: 10, class: 'muted', text: 'No requests in this window.' })));
      return;
    }
    reconcile(this.costTable.tbody, groups, (g) => `${d.by}/${g.group}`,
      () => h('tr'),
      (tr, g) => {
        const c = cells(tr, 10);
        const i = colour.get(g.group);
        if (c[0].dataset.colour !== String(i) || c[0].dataset.label !== groupLabel(d.by, g.group)) {
          c[0].replaceChildren(swatch(i), ` ${groupLabel(d.by, g.group)}`);
          c[0].dataset.colour = String(i);
          c[0].dataset.label = groupLabel(d.by, g.group);
        }
        for (let k = 1; k < 10; k++) c[k].className = 'num';
        setText(c[1], fmtNum(g.requests));
        setText(c[2], fmtNum(g.input_tokens));
        setText(c[3], fmtNum(g.output_tokens));
        setText(c[4], fmtNum(g.cached_tokens));
        setText(c[5], fmtUSD(g.cost_usd));
        setText(c[6], total > 0 ? fmtPct(g.cost_usd / total) : '–');
        setText(c[7], fmtNum(g.unpriced));
        setText(c[8], fmtNum(g.cache_hits || 0));
        setText(c[9], fmtUSD(g.saved_usd || 0));
        setAttr(tr, 'data-group', g.group);
      });
  }

  renderBudgets(d) {
    const list = d.budgets || [];
    const low = list.filter((b) => b.limit_usd > 0 && b.remaining_usd / b.limit_usd < LOW).length;
    const degraded = list.some((b) => b.degraded);
    setText(this.budgets.note, `${list.length} budget${list.length === 1 ? '' : 's'}` +
      `${low ? ` · ${low} with less than ${fmtPct(LOW)} left` : ''}` +
      `${degraded ? ' · Redis is away: the figures are the last ones seen' : ''}`);
    if (list.length === 0) {
      this.budgetTable.tbody.replaceChildren(h('tr', { 'data-key': '' }, h('td', {
        colspan: 7, class: 'muted', text: 'No budgets are configured (a budget: on a team or client in the routes file).',
      })));
      return;
    }
    reconcile(this.budgetTable.tbody, list, (b) => `${b.owner.kind}:${b.owner.name}/${b.window}`,
      () => h('tr'),
      (tr, b) => {
        const c = cells(tr, 7);
        setText(c[0], `${b.owner.kind} ${b.owner.name}`);
        setText(c[1], b.window);
        for (const k of [2, 3, 4]) c[k].className = 'num';
        setText(c[2], fmtUSD(b.limit_usd));
        setText(c[3], fmtUSD(b.spent_usd));
        setText(c[4], fmtUSD(b.reserved_usd));
        const left = b.limit_usd > 0 ? Math.max(0, Math.min(1, b.remaining_usd / b.limit_usd)) : 0;
        if (!c[5].firstChild || c[5].firstChild.nodeType !== 1) {
          c[5].replaceChildren(h('span', { class: 'meter', 'aria-hidden': 'true' }, h('span')), h('span'));
        }
        c[5].firstChild.firstChild.style.width = `${(left * 100).toFixed(1)}%`;
        setText(c[5].lastChild, `${fmtUSD(b.remaining_usd)} (${fmtPct(left)})`);
        setText(c[6], b.resets_at ? `${fmtTime(b.resets_at)} (${fmtIn(b.resets_at)})` : 'never (total)');
        setAttr(tr, 'class', left < LOW ? 'cooling' : null);
        setAttr(tr, 'data-owner', `${b.owner.kind}:${b.owner.name}`);
        setAttr(tr, 'data-window', b.window);
        setAttr(tr, 'data-resets', JSON.stringify(b.resets_at));
      });
  }

  showError() {}
}

// spendChart draws the cost of each bucket as a bar stacked by group (the
// costliest at the bottom) on the window's time axis, with a legend and a
// text alternative that name every group's total.
function spendChart(d, spanMs, colour, groups, total) {
  const byLabel = GROUPS.find(([k]) => k === d.by)[1].toLowerCase();
  if (!(total > 0)) {
    return [h('p', { class: 'muted', text: groups.length ? 'No priced requests in this window.' : 'No requests in this window.' })];
  }
  const since = new Date(d.since).getTime();
  const until = since + spanMs;
  const bucketMs = parseGoDuration(d.bucket) || 3600e3;
  // Bucket start -> the points of its groups, bottom first.
  const buckets = new Map();
  for (const p of d.series || []) {
    const t = new Date(p.bucket).getTime();
    if (Number.isNaN(t)) continue;
    if (!buckets.has(t)) buckets.set(t, []);
    buckets.get(t).push(p);
  }
  let max = 0;
  for (const pts of buckets.values()) {
    pts.sort((a, b) => (colour.get(a.group) ?? COLOURS - 1) - (colour.get(b.group) ?? COLOURS - 1));
    max = Math.max(max, pts.reduce((a, p) => a + p.cost_usd, 0));
  }
  if (!(max > 0)) max = total;

  const W = 900;
  const H = 220;
  const L = 78;
  const R = 10;
  const T = 12;
  const B = 26;
  const span = Math.max(1, until - since);
  const x = (t) => L + ((t - since) / span) * (W - L - R);
  const y = (usd) => H - B - (usd / max) * (H - T - B);
  const bw = Math.max(1, ((bucketMs / span) * (W - L - R)) - 1);

  const named = groups.slice(0, COLOURS - 1);
  const rest = groups.slice(COLOURS - 1);
  const legend = named.map((g, i) => [i, groupLabel(d.by, g.group), g.cost_usd]);
  if (rest.length) legend.push([COLOURS - 1, `${rest.length} other${rest.length === 1 ? '' : 's'}`, rest.reduce((a, g) => a + g.cost_usd, 0)]);
  let costliest = null;
  for (const [t, pts] of buckets) {
    const sum = pts.reduce((a, p) => a + p.cost_usd, 0);
    if (!costliest || sum > costliest[1]) costliest = [t, sum];
  }
  const summary = `Cost by ${byLabel}: ${fmtUSD(total)} in all; ` +
    groups.map((g) => `${groupLabel(d.by, g.group)} ${fmtUSD(g.cost_usd)} (${fmtNum(g.requests)} requests)`).join(', ') +
    (costliest ? `; costliest bucket ${fmtTime(new Date(costliest[0]).toISOString())} at ${fmtUSD(costliest[1])}.` : '.');
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'spend-chart-t', width: '100%' },
    s('title', { id: 'spend-chart-t', text: summary }),
    s('line', { class: 'grid', x1: L, x2: W - R, y1: T, y2: T }),
    s('line', { class: 'grid', x1: L, x2: W - R, y1: y(max / 2), y2: y(max / 2) }),
    s('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }),
    s('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }),
    s('text', { class: 'tick', x: L - 4, y: T + 4, 'text-anchor': 'end', text: fmtUSD(max) }),
    s('text', { class: 'tick', x: L - 4, y: y(max / 2) + 4, 'text-anchor': 'end', text: fmtUSD(max / 2) }),
    s('text', { class: 'tick', x: L - 4, y: H - B, 'text-anchor': 'end', text: '$0' }),
    s('text', { class: 'tick', x: L, y: H - 6, text: fmtTime(new Date(since).toISOString()) }),
    s('text', { class: 'tick', x: W - R, y: H - 6, 'text-anchor': 'end', text: fmtTime(new Date(until).toISOString()) }));
  for (const [t, pts] of buckets) {
    let base = 0;
    const g = s('g', { class: 'sp-bucket', 'data-bucket': new Date(t).toISOString() });
    for (const p of pts) {
      if (!(p.cost_usd > 0)) continue;
      const i = colour.get(p.group) ?? COLOURS - 1;
      const top = base + p.cost_usd;
      g.append(s('rect', { class: `sp-${i}`, x: x(t), width: bw, y: y(top), height: Math.max(1, y(base) - y(top)), 'data-group': p.group },
        s('title', { text: `${fmtTime(p.bucket)} · ${groupLabel(d.by, p.group)}: ${fmtUSD(p.cost_usd)}, ${fmtNum(p.requests)} request${p.requests === 1 ? '' : 's'}` })));
      base = top;
    }
    svg.append(g);
  }
  return h('figure', { class: 'chart spend-chart', 'data-by': d.by },
    h('figcaption', {}, `Cost by ${byLabel} per ${bucketLabel(d.bucket)} bucket`),
    h('ul', { class: 'legend', 'aria-label': 'Chart legend' },
      legend.map(([i, name, usd]) => h('li', { 'data-colour': i }, swatch(i), `${name} · ${fmtUSD(usd)}`))),
    svg);
}
