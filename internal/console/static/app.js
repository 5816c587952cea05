// The console's shell: sign-in, hash routing and the
// refresh loop. Screens live in their own modules and share one interface:
// a view has an element (el), a heading to focus, refresh(signal) that
// fetches and updates in place, and optionally update(route) for a new
// route of the same screen.
import { api, AuthError, TOKEN_KEY, token } from './api.js';
import { setText, fmtTime } from './dom.js';
import { OverviewView } from './overview.js';
import { RequestsView } from './requests.js';
import { RequestView } from './request.js';
import { SpendView } from './spend.js';
import { KeysView } from './keys.js';

const REFRESH_MS = 5000;

const $ = (id) => document.getElementById(id);

// parseRoute reads location.hash: #/overview, #/requests?status=..., #/requests/<id>,
// #/spend?by=team&window=24h, #/keys?team=...&before=....
export function parseRoute(hash) {
  const raw = (hash || '').replace(/^#\/?/, '');
  const [path, query = ''] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query);
  if (parts[0] === 'requests' && parts[1]) return { name: 'request', id: parts[1], params };
  if (parts[0] === 'requests') return { name: 'requests', params };
  if (parts[0] === 'spend') return { name: 'spend', params };
  if (parts[0] === 'keys') return { name: 'keys', params };
  return { name: 'overview', params };
}

const views = { overview: OverviewView, requests: RequestsView, request: RequestView, spend: SpendView, keys: KeysView };

let current = null; // the view shown
let currentName = '';
let timer = 0;
let inflight = null;
let paused = false;
let refreshes = 0;

function setRefreshState(text, state) {
  setText($('refresh-state'), text);
  document.body.dataset.refresh = state;
}

function announce(text) {
  setText($('status'), text);
}

function showSignIn(message) {
  stopRefresh();
  sessionStorage.removeItem(TOKEN_KEY);
  current = null;
  currentName = '';
  $('view').replaceChildren();
  $('nav').hidden = true;
  $('session').hidden = true;
  $('signin').hidden = false;
  setText($('signin-message'), message || '');
  document.title = 'Sign in · Gateway console';
  const input = $('token');
  input.value = '';
  input.focus();
}

function showApp() {
  $('signin').hidden = true;
  setText($('signin-message'), '');
  $('nav').hidden = false;
  $('session').hidden = false;
  route();
}

function handleError(err, view) {
  if (err instanceof AuthError) {
    showSignIn(`${err.message} Sign in again.`);
    return;
  }
  if (err.name === 'AbortError') return;
  setRefreshState(`Refresh failed ${fmtTime(new Date().toISOString())}`, 'error');
  if (view && view.showError) view.showError(err);
}

// refresh runs the current view's refresh once; a newer one aborts it.
async function refresh() {
  if (!current) return;
  if (inflight) inflight.abort();
  const ac = new AbortController();
  inflight = ac;
  const view = current;
  try {
    await view.refresh(ac.signal);
    if (view !== current || ac.signal.aborted) return;
    refreshes++;
    document.body.dataset.refreshes = String(refreshes);
    setRefreshState(
      paused ? `Paused · updated ${fmtTime(new Date().toISOString())}` : `Updated ${fmtTime(new Date().toISOString())}`,
      paused ? 'paused' : 'on',
    );
  } catch (err) {
    handleError(err, view);
  } finally {
    if (inflight === ac) inflight = null;
  }
}

function stopRefresh() {
  clearTimeout(timer);
  timer = 0;
  if (inflight) inflight.abort();
}

// schedule arms the next refresh, unless the tab is hidden or the operator
// paused it: a hidden tab costs the gateway nothing.
function schedule() {
  clearTimeout(timer);
  timer = 0;
  if (!current || paused || document.hidden) return;
  timer = setTimeout(async () => {
    await refresh();
    schedule();
  }, REFRESH_MS);
}

async function refreshAndSchedule() {
  clearTimeout(timer);
  await refresh();
  schedule();
}

function route() {
  if (!token()) {
    showSignIn('');
    return;
  }
  const r = parseRoute(location.hash);
  for (const name of ['overview', 'requests', 'spend', 'keys']) {
    const active = r.name === name || (name === 'requests' && r.name === 'request');
    const link = $(`nav-${name}`);
    if (active) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (current && currentName === r.name && current.update && current.update(r)) {
    refreshAndSchedule();
    return;
  }
  if (inflight) inflight.abort();
  current = new views[r.name](r);
  currentName = r.name;
  // A screen that writes (Keys) shows the result of its write at once.
  const view = current;
  current.requestRefresh = () => { if (current === view) refreshAndSchedule(); };
  $('view').replaceChildren(current.el);
  document.title = `${current.title} · Gateway console`;
  announce(`${current.title} screen`);
  // Move focus to the new screen's heading so keyboard and screen reader
  // users start there, as after a page load.
  if (document.activeElement !== $('token')) current.heading.focus({ preventScroll: false });
  refreshAndSchedule();
}

function init() {
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const tok = $('token').value.trim();
    if (!tok) return;
    setText($('signin-message'), 'Checking…');
    try {
      await api('/admin/admission', undefined, tok);
    } catch (err) {
      setText($('signin-message'), err instanceof AuthError ? 'That token was refused (401).' : `Sign-in failed: ${err.message}`);
      $('token').value = '';
      $('token').focus();
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, tok);
    $('token').value = '';
    if (!location.hash || location.hash === '#') history.replaceState(null, '', '#/overview');
    showApp();
  });
  $('signout').addEventListener('click', () => showSignIn('Signed out.'));
  $('pause').addEventListener('click', () => {
    paused = !paused;
    $('pause').textContent = paused ? 'Resume refresh' : 'Pause refresh';
    $('pause').setAttribute('aria-pressed', String(paused));
    if (paused) {
      stopRefresh();
      setRefreshState('Refresh paused', 'paused');
    } else {
      refreshAndSchedule();
    }
  });
  $('pause').setAttribute('aria-pressed', 'false');
  window.addEventListener('hashchange', route);
  document.addEventListener('visibilitychange', () => {
    if (!current) return;
    if (document.hidden) {
      stopRefresh();
      setRefreshState('Refresh stopped while the tab is hidden', 'hidden');
    } else if (!paused) {
      refreshAndSchedule();
    }
  });
  if (token()) showApp();
  else showSignIn('');
}

init();
