// The admin API client: every call carries the admin token kept in this
// tab's session storage as a bearer token.

export const TOKEN_KEY = 'llmgw-admin-token';

export class AuthError extends Error {}
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

// api fetches an /admin path with the bearer token. 401 is an AuthError
// (the shell returns to the sign-in form); other failures are ApiErrors
// carrying the gateway's error message.
export async function api(path, signal, tok = token()) {
  const resp = await fetch(path, {
    headers: { Authorization: `Bearer ${tok}`, Accept: 'application/json' },
    cache: 'no-store',
    credentials: 'omit',
    signal,
  });
  if (resp.status === 401) throw new AuthError('The gateway refused the admin token (401).');
  let body = null;
  try {
    body = await resp.json();
  } catch {
    body = null;
  }
  if (!resp.ok) {
    const msg = body && body.error && body.error.message ? body.error.message : resp.statusText;
    throw new ApiError(resp.status, `${resp.status}: ${msg}`);
  }
  return body;
}

