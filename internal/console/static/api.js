// The admin API client: every call carries the admin token kept in this
// tab's session storage as a bearer token.

export const TOKEN_KEY = 'llmgw-admin-token';

export class AuthError extends Error {}
export class ApiError extends Error {
  constructor(status, message, code = '', param = '') {
    super(message);
    this.status = status;
    this.code = code; // the gateway's error code (read_only_token, name_taken, ...)
    this.param = param; // the body member a 400 is about (name, budget.usd, ...)
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

// api fetches an /admin path with the bearer token. 401 is an AuthError
// (the shell returns to the sign-in form); other failures are ApiErrors
// carrying the gateway's error message.
export async function api(path, signal, tok = token()) {
  return call('GET', path, undefined, signal, tok);
}

// send makes an admin write (POST, PATCH, DELETE) with a JSON body.
export async function send(method, path, body) {
  return call(method, path, body, undefined, token());
}

async function call(method, path, body, signal, tok) {
  const headers = { Authorization: `Bearer ${tok}`, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
    signal,
  });
  if (resp.status === 401) throw new AuthError('The gateway refused the admin token (401).');
  let data = null;
  try {
    data = await resp.json();
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const e = data && data.error ? data.error : {};
    throw new ApiError(resp.status, `${resp.status}: ${e.message || resp.statusText}`, e.code || '', e.param || '');
  }
  return data;
}
