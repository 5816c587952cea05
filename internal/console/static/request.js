// A request: its summary and its candidate timeline, one bar per attempt on
// the request's time axis, skipped and unused candidates as markers.
import { api } from './api.js';
import { h, s, setText, setAttr, reconcile, swapIfChanged, badge, fmtMs, fmtNum, fmtTime, fmtUSD } from './dom.js';

// The statuses a candidate can have, in the legend's order, with how each
// is drawn: a bar for the attempted ones, a marker for the others.
const LEGEND = [
  ['success', 'bar', 'answered the request'],
  ['failed', 'bar', 'attempt failed (hatched bar)'],
  ['cancelled', 'bar', 'ended with nobody upstream at fault'],
  ['pending', 'bar', 'attempt in flight'],
  ['streaming', 'bar', 'streaming to the client'],
  ['skipped', 'marker', 'not tried by policy, with the reason (diamond)'],
  ['unused', 'marker', 'never tried: settled before its turn (hollow diamond)'],
  ['available', 'marker', 'planned, not tried yet (hollow diamond)'],
];

const TERMINAL = new Set(['success', 'failed', 'cancelled', 'unused', 'skipped']);

const ms = (iso) => (iso ? new Date(iso).getTime() : NaN);

function diamond(cx, cy, r, cls) {
  return s('path', { class: cls, d: `M${cx} ${cy - r}L${cx + r} ${cy}L${cx} ${cy + r}L${cx - r} ${cy}Z` });
}

function legendSwatch(status, kind) {
  const svg = s('svg', { width: 18, height: 14, 'aria-hidden': 'true' });
  if (kind === 'bar') {
    svg.append(s('rect', { class: `tl-${status}`, x: 1, y: 2, width: 16, height: 10 }));
    if (status === 'failed') svg.append(s('rect', { x: 1, y: 2, width: 16, height: 10, fill: 'url(#hatch-legend)' }));
  } else {
    svg.append(diamond(9, 7, 6, `tl-${status}`));
  }
  return svg;
}

// candidateText is the one-line description drawn next to a candidate and
// read by screen readers: never colour alone.
function candidateText(c) {
  const parts = [c.status];
  if (c.skip_reason) parts.push(c.skip_reason);
  if (c.status_code !== null && c.status_code !== undefined) parts.push(String(c.status_code));
  if (c.error_type) parts.push(c.error_type);
  if (c.latency_ms !== null && c.latency_ms !== undefined) parts.push(`${fmtMs(c.latency_ms)}`);
  if (c.first_byte_ms !== null && c.first_byte_ms !== undefined) parts.push(`first byte ${fmtMs(c.first_byte_ms)}`);
  if (c.started_at) parts.push(candidateCost(c, true));
  return parts.join(' · ');
}

// candidateCost is what an attempt cost. Without a cost, an attempt that
// reported no usage and did not answer failed before its commit point:
// providers do not bill those (docs/cost.md). Otherwise the cost is
// unknown: an unpriced model, or an answer without usage.
function candidateCost(c, prefix) {
  if (c.cost_usd !== null && c.cost_usd !== undefined) return `${prefix ? 'cost ' : ''}${fmtUSD(c.cost_usd, c.usage_estimated)}`;
  if (!c.started_at) return '–';
  if ((c.prompt_tokens === null || c.prompt_tokens === undefined) && c.status !== 'success') return 'not billed';
  return prefix ? 'cost unknown' : 'unknown';
}

// tokens is an attempt's usage as "prompt / completion" (with the cached
// share of the prompt when there is one); a dash when it reported none.
function tokens(c) {
  if (c.prompt_tokens === null || c.prompt_tokens === undefined) return '–';
  const cached = c.cached_tokens ? ` (${fmtNum(c.cached_tokens)} cached)` : '';
  return `${fmtNum(c.prompt_tokens)}${cached} / ${fmtNum(c.completion_tokens)}`;
}

const label = (c) => `#${c.candidate_index}${c.retry_index ? `.${c.retry_index}` : ''} ${c.provider}`;

export class RequestView {
  constructor(route) {
    this.id = route.id;
    this.title = `Request ${route.id}`;
    this.heading = h('h1', { tabindex: '-1' }, 'Request ', h('code', { text: route.id }));
    this.error = h('p', { class: 'error', role: 'alert', hidden: true });
    this.summary = h('dl', { class: 'summary' });
    this.legend = h('ul', { class: 'legend', 'aria-label': 'Timeline legend' },
      s('svg', { width: 0, height: 0, 'aria-hidden': 'true', class: 'visually-hidden' }, hatchDefs('hatch-legend')),
      LEGEND.map(([st, kind, text]) => h('li', {}, legendSwatch(st, kind), h('span', {}, h('strong', { text: st }), ` ${text}`))));
    this.chart = h('div', { id: 'timeline' });
    this.tbody = h('tbody');
    const cols = [['#'], ['Provider'], ['Key'], ['Model'], ['Status'], ['Skip reason'], ['Code', 'num'],
      ['Error type'], ['Error message'], ['Started', 'num'], ['Latency', 'num'], ['First byte', 'num'],
      ['Tokens (in / out)', 'num'], ['Cost', 'num']];
    this.table = h('table', { id: 'candidates-table' },
      h('caption', { class: 'visually-hidden', text: 'Candidates in plan order' }),
      h('thead', {}, h('tr', {}, cols.map(([l, c]) => h('th', { scope: 'col', class: c || null, text: l })))),
      this.tbody);
    this.el = h('div', { class: 'view-request' },
      h('p', {}, h('a', { href: '#/requests', text: '← All requests' })),
      this.heading, this.error, this.summary,
      h('h2', { id: 'tl-h', text: 'Candidate timeline' }),
      h('p', { class: 'section-note', text: 'From the request\u2019s receipt to its end; a white tick marks an attempt\u2019s first byte.' }),
      this.legend, this.chart,
      h('h2', { text: 'Candidates' }),
      h('div', { class: 'table-wrap' }, this.table));
  }

  update(route) {
    return route.id === this.id;
  }

  async refresh(signal) {
    let tl;
    try {
      tl = await api(`/admin/requests/${encodeURIComponent(this.id)}`, signal);
    } catch (err) {
      this.showError(err);
      throw err;
    }
    this.error.hidden = true;
    const sig = JSON.stringify(tl);
    if (this.sig === sig) return;
    this.sig = sig;
    this.renderSummary(tl.request, tl.trace_url);
    const t0 = ms(tl.request.created_at);
    swapIfChanged(this.chart, sig, () => (tl.request.cache === 'hit' ? cacheHitNote(tl.request) : timeline(tl)));
    reconcile(this.tbody, tl.candidates, (c) => `${c.candidate_index}.${c.retry_index}`,
      () => {
        const tr = h('tr');
        for (let i = 0; i < 14; i++) tr.append(h('td'));
        for (const i of [6, 9, 10, 11, 12, 13]) tr.children[i].className = 'num';
        tr.children[13].classList.add('cost');
        return tr;
      },
      (tr, c) => {
        const td = tr.children;
        setText(td[0], `${c.candidate_index}${c.retry_index ? `.${c.retry_index}` : ''}`);
        setText(td[1], c.provider);
        td[2].className = 'mono';
        setText(td[2], c.key_id);
        setText(td[3], c.model);
        if (td[4].dataset.status !== c.status) {
          td[4].replaceChildren(badge(c.status));
          td[4].dataset.status = c.status;
        }
        setText(td[5], c.skip_reason || '–');
        setText(td[6], c.status_code ?? '–');
        setText(td[7], c.error_type || '–');
        td[8].className = 'wrap';
        setText(td[8], c.error_message || '–');
        setText(td[9], c.started_at ? `+${fmtMs(ms(c.started_at) - t0)}` : '–');
        setText(td[10], fmtMs(c.latency_ms));
        setText(td[11], fmtMs(c.first_byte_ms));
        setText(td[12], tokens(c));
        setText(td[13], candidateCost(c, false));
        setAttr(tr, 'data-status', c.status);
        setAttr(tr, 'data-provider', c.provider);
      });
  }

  // traceURL is the trace viewer's page of the request's trace, when the
  // gateway has GATEWAY_TRACE_URL set (docs/tracing.md).
  renderSummary(r, traceURL) {
    let trace = r.trace_id ? h('span', { class: 'mono', text: r.trace_id }) : '–';
    if (r.trace_id && traceURL) {
      trace = h('a', { class: 'mono', href: traceURL, target: '_blank', rel: 'noopener noreferrer', text: r.trace_id });
    }
    const items = [
      ['Status', badge(r.status)], ['Code', r.status_code ?? '–'], ['Error type', r.error_type || '–'],
      ['Model', r.model], ['Route', r.route + (r.stream ? ' (stream)' : '')], ['Client', r.client || '–'],
      ['Priority', r.priority || '–'], ['Created', fmtTime(r.created_at, true)], ['Finished', fmtTime(r.finished_at, true)],
      ['Latency', fmtMs(r.latency_ms)], ['First byte', fmtMs(r.first_byte_ms)], ['Candidates', fmtNum(r.candidate_count)],
      ['Tokens (prompt / completion / total)', `${fmtNum(r.prompt_tokens)} / ${fmtNum(r.completion_tokens)} / ${fmtNum(r.total_tokens)}`],
      ['Tokens (cached / cache write / reasoning)', `${fmtNum(r.cached_tokens)} / ${fmtNum(r.cache_write_tokens)} / ${fmtNum(r.reasoning_tokens)}`],
      ['Cost', h('span', { id: 'request-cost', text: r.cost_usd === null || r.cost_usd === undefined ? 'unknown' : fmtUSD(r.cost_usd, r.usage_estimated) })],
      ['Cache', cacheText(r)],
      ['Team', r.team || '–'],
      ['Client request id', r.client_request_id || '–'],
      ['Trace', trace],
    ];
    swapIfChanged(this.summary, JSON.stringify(r) + (traceURL || ''), () => items.map(([k, v]) =>
      h('div', {}, h('dt', { text: k }), h('dd', {}, v))));
    setAttr(this.summary, 'data-status', r.status);
  }

  showError(err) {
    if (err.name === 'AbortError') return;
    this.error.hidden = false;
    setText(this.error, err.status === 404
      ? 'No such request on record (yet): records are written shortly after a request ends.'
      : `Could not load the request: ${err.message}`);
  }
}

// cacheText is what the route's response cache did with the request.
function cacheText(r) {
  switch (r.cache) {
    case 'hit': return `hit: served from the cache, saved ${fmtUSD(r.saved_usd)}`;
    case 'miss': return 'miss: not in the cache, answered by a provider';
    case 'bypass': return 'bypass: not looked up';
    default: return '–';
  }
}

// cacheHitNote stands in for the timeline of a request answered from the
// response cache: no candidate was planned or tried.
function cacheHitNote(r) {
  return h('p', { id: 'cache-hit-note', class: 'cache-hit' },
    h('strong', { text: 'Served from the response cache' }),
    ` in ${fmtMs(r.latency_ms)}: no gate was taken and no candidate tried. It cost nothing; its answer cost ` +
    `${fmtUSD(r.saved_usd)} when it was stored.`);
}

function hatchDefs(id) {
  return s('defs', {}, s('pattern', { id, width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
    s('rect', { width: 2, height: 6, fill: '#ffffff', 'fill-opacity': '0.55' })));
}

// timeline draws the candidates on the request's time axis: created_at to
// finished_at (or the latest moment known while it is still pending).
function timeline(tl) {
  const r = tl.request;
  const cands = tl.candidates || [];
  const t0 = ms(r.created_at);
  let t1 = ms(r.finished_at);
  for (const c of cands) {
    for (const v of [ms(c.started_at), ms(c.finished_at)]) if (!Number.isNaN(v) && (Number.isNaN(t1) || v > t1)) t1 = v;
  }
  if (Number.isNaN(t1) || !TERMINAL.has(r.status)) t1 = Math.max(Number.isNaN(t1) ? t0 : t1, Date.now());
  const span = Math.max(1, t1 - t0);

  const W = 1000;
  const L = 230; // labels
  const R = 20;
  const top = 34;
  const rowH = 46;
  const H = top + Math.max(1, cands.length) * rowH + 8;
  const x = (t) => L + (Math.min(Math.max(t - t0, 0), span) / span) * (W - L - R);

  const summary = cands.map((c) => `${label(c)}: ${candidateText(c)}`).join('; ');
  const svg = s('svg', { class: 'timeline', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'tl-title' },
    s('title', { id: 'tl-title', text: `Candidate timeline over ${fmtMs(span)}: ${summary || 'no candidates'}` }),
    hatchDefs('hatch'));
  // Axis with five ticks in milliseconds from receipt.
  svg.append(s('line', { class: 'axis', x1: L, x2: W - R, y1: top - 8, y2: top - 8 }));
  for (let i = 0; i <= 4; i++) {
    const tx = L + (i / 4) * (W - L - R);
    svg.append(s('line', { class: 'grid', x1: tx, x2: tx, y1: top - 12, y2: H - 8 }));
    svg.append(s('text', { class: 'tick', x: tx, y: top - 16, 'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle', text: `+${fmtMs((span * i) / 4)}` }));
  }
  svg.append(s('text', { class: 'tick', x: 4, y: top - 16, text: `received ${fmtTime(r.created_at, true)}` }));

  let walk = t0; // where the walk was when it reached a candidate not tried
  cands.forEach((c, i) => {
    const y = top + i * rowH;
    const g = s('g', { 'data-status': c.status, class: 'tl-row' },
      s('title', { text: `${label(c)} (${c.key_id}, ${c.model}): ${candidateText(c)}${c.error_message ? ` — ${c.error_message}` : ''}` }),
      s('text', { class: 'tl-label', x: 4, y: y + 12, text: label(c) }),
      s('text', { class: 'tl-note', x: 4, y: y + 28, text: `${c.key_id} · ${c.model}` }));
    const start = ms(c.started_at);
    let noteX;
    if (!Number.isNaN(start)) {
      let end = ms(c.finished_at);
      if (Number.isNaN(end)) end = TERMINAL.has(c.status) ? start + (c.latency_ms || 0) : t1;
      const bx = x(start);
      const bw = Math.max(3, x(end) - bx);
      g.append(s('rect', { class: `tl-${c.status}`, x: bx, y: y + 2, width: bw, height: 16, rx: 2 }));
      if (c.status === 'failed') g.append(s('rect', { x: bx, y: y + 2, width: bw, height: 16, fill: 'url(#hatch)' }));
      if (c.first_byte_ms !== null && c.first_byte_ms !== undefined) {
        const fx = x(start + c.first_byte_ms);
        g.append(s('line', { class: 'tl-fb', x1: fx, x2: fx, y1: y + 2, y2: y + 18 }));
      }
      walk = Math.max(walk, end);
      noteX = bx;
    } else {
      // Not tried: a marker where the walk stood (the end of the previous
      // attempt, or the request's end for candidates never reached).
      const at = c.status === 'unused' ? t1 : walk;
      const mx = Math.min(Math.max(x(at), L + 8), W - R - 8);
      g.append(diamond(mx, y + 10, 8, `tl-${c.status}`));
      noteX = mx - 8;
    }
    const text = candidateText(c) + (c.error_message ? ` — ${c.error_message}` : '');
    const anchorEnd = noteX > L + (W - L - R) * 0.55;
    g.append(s('text', {
      class: 'tl-note', x: anchorEnd ? W - R : noteX, y: y + 34, 'text-anchor': anchorEnd ? 'end' : 'start',
      text: text.length > 110 ? `${text.slice(0, 107)}…` : text,
    }));
    svg.append(g);
  });
  return svg;
}
