/**
 * The one place the console calls the gateway: same-origin cookie, no Authorization header, the
 * CSRF header on every state-changing call, and one error type carrying the server's own message.
 */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | null,
  ) {
    super(message);
  }
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

let csrfToken: string | null = null;
let onUnauthorized: (() => void) | null = null;

/** Held in memory only: after a reload it comes again from GET /console/session. */
export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}

/** Called on any 401 from an API call: the session is gone, so the app returns to sign-in. */
export function setUnauthorizedHandler(handler: (() => void) | null): void {
  onUnauthorized = handler;
}

async function errorOf(response: Response): Promise<ApiError> {
  let message = `The gateway answered ${response.status} ${response.statusText}.`;
  let code: string | null = null;
  try {
    const body = (await response.json()) as { error?: { message?: string; code?: string } };
    if (body.error?.message) message = body.error.message;
    code = body.error?.code ?? null;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, message, code);
}

export interface RequestOptions {
  /** Sign-in's own 401 means a wrong token, not an expired session. */
  quietUnauthorized?: boolean;
}

export async function request<T>(method: Method, path: string, body?: unknown, options: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken !== null) headers['x-csrf-token'] = csrfToken;
  let response: Response;
  try {
    response = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, 'The gateway cannot be reached. Check the network and try again.', null);
  }
  if (!response.ok) {
    const error = await errorOf(response);
    if (response.status === 401 && !options.quietUnauthorized) onUnauthorized?.();
    throw error;
  }
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

/** Query string of the defined values. */
export function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined) search.set(name, String(value));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}
