// The API client of the console: same origin, JSON, the API's bearer
// token from sessionStorage, and a prompt for one when the API answers 401.

const tokenKey = 'weir.token';

/** ApiError is an API error reply: HTTP status, registry code, message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
  }
}

let asking = null; // the pending token prompt, shared by concurrent calls

function askToken(reason) {
  if (asking) return asking;
  const dlg = document.getElementById('token-dialog');
  const input = document.getElementById('token-input');
  const why = document.getElementById('token-why');
  if (reason) why.textContent = reason;
  dlg.hidden = false;
  input.value = '';
  input.focus();
  asking = new Promise((resolve) => {
    const done = () => {
      const tok = input.value.trim();
      if (!tok) return;
      sessionStorage.setItem(tokenKey, tok);
      dlg.hidden = true;
      document.getElementById('token-save').onclick = null;
      input.onkeydown = null;
      asking = null;
      showAuth();
      resolve(tok);
    };
    document.getElementById('token-save').onclick = done;
    input.onkeydown = (e) => { if (e.key === 'Enter') done(); };
  });
  return asking;
}

/** showAuth shows whether a token is in use, with a way to forget it. */
export function showAuth() {
  const el = document.getElementById('auth-status');
  if (!el) return;
  el.textContent = '';
  if (!sessionStorage.getItem(tokenKey)) return;
  el.append('token set · ');
  const b = document.createElement('button');
  b.className = 'link';
  b.textContent = 'forget token';
  b.onclick = () => { sessionStorage.removeItem(tokenKey); location.reload(); };
  el.append(b);
}

/**
 * api calls the API: method, path (with query), optional JSON body. It
 * resolves to the decoded reply (null for 204) and rejects with an
 * ApiError. With allowError, an error reply that has a JSON body other
 * than {error} (an update's refused report) resolves to {status, body}.
 */
export async function api(method, path, body, { allowError = false } = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = { Accept: 'application/json' };
    const tok = sessionStorage.getItem(tokenKey);
    if (tok) headers.Authorization = 'Bearer ' + tok;
    const init = { method, headers, credentials: 'omit', cache: 'no-store' };
    if (method !== 'GET' && method !== 'HEAD') {
      headers['Content-Type'] = 'application/json';
      if (body !== undefined) init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'UNREACHABLE', `the server did not answer ${method} ${path}: ${e.message}`);
    }
    if (res.status === 401 && attempt < 5) {
      if (tok) sessionStorage.removeItem(tokenKey);
      await askToken(tok ? 'The server refused the token (401): enter another one.' : undefined);
      continue;
    }
    if (res.status === 204) return null;
    let data = null;
    const text = await res.text();
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (res.ok) return data;
    if (allowError && data && !('error' in data && Object.keys(data).length === 1)) {
      return { status: res.status, body: data };
    }
    const err = data && data.error ? data.error : {};
    throw new ApiError(res.status, err.code, err.message || `${method} ${path}: HTTP ${res.status}`);
  }
}

/** optional is api for a route that may not exist in this build: null on 404/405. */
export async function optional(path) {
  try {
    return await api('GET', path);
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 405)) return null;
    throw e;
  }
}
