// Overview: admission gates, target health and traffic by provider.
import { api, AuthError } from './api.js';
import {
  h, s, setText, setAttr, reconcile, swapIfChanged, badge,
  fmtSeconds, fmtNum, fmtPct, fmtMs, fmtTime, fmtIn, parseGoDuration,
} from './dom.js';

// section builds a titled block with a note line and an error line (the
// spend screen shares it and the helpers below).
export function section(id, title) {
  const heading = h('h2', { id: `${id}-h`, text: title });
  const note = h('span', { class: 'section-note', id: `${id}-note` });
  const error = h('p', { class: 'error', id: `${id}-error`, role: 'alert', hidden: true });
  const body = h('div', { id: `${id}-body` });
  const el = h('section', { 'aria-labelledby': `${id}-h`, id },
    h('div', { class: 'section-head' }, heading, note), error, body);
  return { el, note, error, body };
}

export function showSectionError(sec, err) {
  sec.error.hidden = false;
  setText(sec.error, err.status === 501
    ? `Not available from this gateway yet (${err.message}).`
    : `Could not load: ${err.message}`);
}

export function clearSectionError(sec) {
  sec.error.hidden = true;
  setText(sec.error, '');
}

export function table(caption, headers) {
  const tbody = h('tbody');
  const ths = headers.map(([label, cls]) => h('th', { scope: 'col', class: cls || null, text: label }));
  const t = h('table', {}, h('caption', { class: 'visually-hidden', text: caption }), h('thead', {}, h('tr', {}, ths)), tbody);
  return { wrap: h('div', { class: 'table-wrap' }, t), tbody, ths };
}

export function cells(tr, n) {
  while (tr.children.length < n) tr.append(h('td'));
  return Array.from(tr.children);
}

export class OverviewView {
  constructor() {
    this.title = 'Overview';
    this.heading = h('h1', { tabindex: '-1', text: 'Overview' });
    this.gates = section('gates', 'Admission gates');
    this.health = section('health', 'Target health');
    this.traffic = section('traffic', 'Traffic by provider, last hour');

    this.gatesTable = table('Admission gates: the global gate first, then one per target', [
      ['Gate'], ['Provider'], ['Target'], ['Active / limit'], ['Pending', 'num'], ['Admitted', 'num'],
      ['Timed out', 'num'], ['Rejected', 'num'], ['Wait p50', 'num'], ['Wait p99', 'num'],
    ]);
    this.gates.body.append(this.gatesTable.wrap);

    this.healthTable = table('Health of every target (provider key)', [
      ['Provider'], ['Key'], ['Target'], ['State'], ['Cooldown until'], ['Consecutive failures', 'num'],
      ['Last error'], ['First byte (EWMA)', 'num'],
    ]);
    this.health.body.append(this.healthTable.wrap);

    this.charts = h('div', { class: 'charts' });
    this.trafficTable = table('Attempts and failures per provider over the window', [
      ['Provider'], ['Attempts', 'num'], ['Per minute', 'num'], ['Failed', 'num'], ['Failure rate', 'num'],
    ]);
    this.traffic.body.append(
      h('ul', { class: 'legend', 'aria-label': 'Chart legend' },
        h('li', {}, s('svg', { width: 14, height: 14, 'aria-hidden': 'true' }, s('rect', { width: 14, height: 14, class: 'bar-ok' })), 'attempts that did not fail'),
        h('li', {}, s('svg', { width: 14, height: 14, 'aria-hidden': 'true' }, s('rect', { width: 14, height: 14, class: 'bar-failed' })), 'failed attempts (stacked at the bottom)')),
      this.charts, this.trafficTable.wrap);

    this.el = h('div', { class: 'view-overview' }, this.heading, this.gates.el, this.health.el, this.traffic.el);
  }

  async refresh(signal) {
    const parts = [
      [this.gates, () => api('/admin/admission', signal).then((d) => this.renderGates(d))],
      [this.health, () => api('/admin/health', signal).then((d) => this.renderHealth(d))],
      [this.traffic, () => api('/admin/stats/providers?window=1h', signal).then((d) => this.renderTraffic(d))],
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

  renderGates(snap) {
    const gates = [snap.global, ...(snap.targets || [])];
    // The percentile fields are used when the gateway reports them; older
    // snapshots carry only the average and the maximum.
    const hasPct = 'wait_p50_seconds' in (snap.global || {});
    setText(this.gatesTable.ths[8], hasPct ? 'Wait p50' : 'Wait avg');
    setText(this.gatesTable.ths[9], hasPct ? 'Wait p99' : 'Wait max');
    setText(this.gates.note, `${fmtNum(snap.pending)} queued overall${snap.closed ? ' · scheduler closed' : ''}`);
    reconcile(this.gatesTable.tbody, gates, (g) => `${g.gate}/${g.label || ''}/${g.id || ''}`,
      () => h('tr'),
      (tr, g) => {
        const c = cells(tr, 10);
        setText(c[0], g.gate);
        setText(c[1], g.label || (g === snap.global ? 'all providers' : ''));
        c[2].className = 'mono';
        setText(c[2], g.id || '');
        const ratio = g.limit > 0 ? Math.min(1, g.active / g.limit) : 0;
        if (!c[3].firstChild || c[3].firstChild.nodeType !== 1) {
          c[3].replaceChildren(h('span', { class: 'meter', 'aria-hidden': 'true' }, h('span')), h('span'));
        }
        c[3].firstChild.firstChild.style.width = `${(ratio * 100).toFixed(1)}%`;
        setText(c[3].lastChild, `${g.active} / ${g.limit}`);
        for (const i of [4, 5, 6, 7, 8, 9]) c[i].className = 'num';
        setText(c[4], fmtNum(g.pending));
        setText(c[5], fmtNum(g.admitted));
        setText(c[6], fmtNum(g.timed_out));
        setText(c[7], fmtNum(g.rejected));
        setText(c[8], fmtSeconds(hasPct ? g.wait_p50_seconds : g.wait_avg_seconds));
        setText(c[9], fmtSeconds(hasPct ? g.wait_p99_seconds : g.wait_max_seconds));
        setAttr(tr, 'data-gate', g.gate);
      });
  }

  renderHealth(targets) {
    const cooling = targets.filter((t) => t.state === 'cooling').length;
    const probing = targets.filter((t) => t.state === 'probing' && t.probe_in_flight).length;
    const due = targets.filter((t) => t.state === 'probing' && !t.probe_in_flight).length;
    setText(this.health.note, `${targets.length} targets · ${cooling} cooling · ${probing} probing · ${due} probe due`);
    reconcile(this.healthTable.tbody, targets, (t) => t.target,
      () => h('tr'),
      (tr, t) => {
        const c = cells(tr, 8);
        setText(c[0], t.provider);
        c[1].className = 'mono';
        setText(c[1], t.key_id);
        c[2].className = 'mono';
        setText(c[2], t.target);
        // A probing target's cooldown is over: it waits for the next
        // request, which becomes its probe (an idle target may wait long),
        // or a probe is out. Neither is a cooldown "ago".
        const label = t.state === 'probing' ? (t.probe_in_flight ? 'probing' : 'probe due') : t.state;
        if (c[3].dataset.label !== label) {
          c[3].replaceChildren(badge(t.state, label));
          c[3].dataset.label = label;
        }
        setText(c[4], healthCooldown(t));
        c[5].className = 'num';
        setText(c[5], fmtNum(t.consecutive_failures));
        setText(c[6], t.last_error_type || '–');
        c[7].className = 'num';
        setText(c[7], t.ewma_first_byte_ms === null ? '–' : fmtMs(t.ewma_first_byte_ms));
        setAttr(tr, 'class', t.state === 'cooling' ? 'cooling' : null);
        setAttr(tr, 'data-provider', t.provider);
        setAttr(tr, 'data-state', t.state);
      });
  }

  renderTraffic(stats) {
    const providers = stats.providers || [];
    const since = new Date(stats.since).getTime();
    const until = new Date(stats.until).getTime();
    const bucketMs = parseGoDuration(stats.bucket) || 60000;
    const minutes = Math.max(1, (until - since) / 60000);
    setText(this.traffic.note, `${fmtTime(stats.since)} – ${fmtTime(stats.until)}, ${stats.bucket} buckets`);
    swapIfChanged(this.charts, JSON.stringify(stats), () => providers.length === 0
      ? [h('p', { class: 'muted', text: 'No attempts in this window.' })]
      : providers.map((p) => chart(p, since, until, bucketMs)));
    reconcile(this.trafficTable.tbody, providers, (p) => p.provider,
      () => h('tr'),
      (tr, p) => {
        const c = cells(tr, 5);
        setText(c[0], p.provider);
        for (const i of [1, 2, 3, 4]) c[i].className = 'num';
        setText(c[1], fmtNum(p.attempts));
        setText(c[2], (p.attempts / minutes).toFixed(2));
        setText(c[3], fmtNum(p.failed));
        setText(c[4], fmtPct(p.failure_rate));
      });
  }

  showError() {}
}

// chart draws one provider's attempts per bucket as stacked bars (failed at
// the bottom) on the window's time axis.
function chart(p, since, until, bucketMs) {
  const W = 440;
  const H = 150;
  const L = 40;
  const R = 8;
  const T = 10;
  const B = 24;
  const span = Math.max(1, until - since);
  const buckets = p.buckets || [];
  const max = Math.max(1, ...buckets.map((b) => b.attempts));
  const x = (t) => L + ((t - since) / span) * (W - L - R);
  const y = (n) => H - B - (n / max) * (H - T - B);
  const bw = Math.max(1, ((bucketMs / span) * (W - L - R)) - 1);
  const id = `chart-${p.provider.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const summary = `${p.provider}: ${fmtNum(p.attempts)} attempts in the window, ${fmtNum(p.failed)} failed (${fmtPct(p.failure_rate)}); busiest bucket ${fmtNum(max)} attempts.`;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': `${id}-t`, width: '100%' },
    s('title', { id: `${id}-t`, text: summary }),
    s('line', { class: 'grid', x1: L, x2: W - R, y1: T, y2: T }),
    s('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }),
    s('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }),
    s('text', { class: 'tick', x: L - 4, y: T + 4, 'text-anchor': 'end', text: fmtNum(max) }),
    s('text', { class: 'tick', x: L - 4, y: H - B, 'text-anchor': 'end', text: '0' }),
    s('text', { class: 'tick', x: L, y: H - 6, text: fmtTime(new Date(since).toISOString()) }),
    s('text', { class: 'tick', x: W - R, y: H - 6, 'text-anchor': 'end', text: fmtTime(new Date(until).toISOString()) }));
  for (const b of buckets) {
    const t = new Date(b.start).getTime();
    if (Number.isNaN(t) || b.attempts <= 0) continue;
    const bx = x(t);
    const ok = b.attempts - b.failed;
    const g = s('g', {}, s('title', { text: `${fmtTime(b.start)}: ${b.attempts} attempts, ${b.failed} failed` }));
    if (b.failed > 0) g.append(s('rect', { class: 'bar-failed', x: bx, width: bw, y: y(b.failed), height: Math.max(1, H - B - y(b.failed)) }));
    if (ok > 0) g.append(s('rect', { class: 'bar-ok', x: bx, width: bw, y: y(b.attempts), height: Math.max(1, y(b.failed) - y(b.attempts)) }));
    svg.append(g);
  }
  return h('figure', { class: 'chart', 'data-provider': p.provider },
    h('figcaption', {}, `${p.provider} · ${fmtPct(p.failure_rate)} failed`),
    svg);
}

// healthCooldown is the cooldown column: when a cooling target's cooldown
// ends; for a probing one, that it ended and what it waits for.
export function healthCooldown(t) {
  if (!t.cooldown_until || t.state === 'healthy') return '–';
  if (t.state === 'probing') {
    return t.probe_in_flight ? 'over · probe out' : 'over · the next request probes';
  }
  return `${fmtTime(t.cooldown_until)} (${fmtIn(t.cooldown_until)})`;
}
