import { redactUrls } from './redact.js';

/** A failure the CLI reports as one line (and exit code), never with a stack. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export type Credential = 'admin' | 'project';

export interface ClientSettings {
  url: string;
  adminToken: string | undefined;
  apiKey: string | undefined;
  timeoutMs?: number;
}

interface ErrorBody {
  error?: { message?: string; code?: string; param?: string };
}

const CREDENTIALS: Record<Credential, { flag: string; env: string; what: string }> = {
  admin: { flag: '--admin-token', env: 'NOVA_ADMIN_TOKEN', what: 'admin token' },
  project: { flag: '--api-key', env: 'NOVA_API_KEY', what: "project's API key" },
};

const NETWORK_CAUSES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ETIMEDOUT: 'connection timed out',
};

/** The admin API and the project routes, with errors an operator can act on. */
export class GatewayClient {
  private readonly base: string;

  constructor(private readonly settings: ClientSettings) {
    let url: URL;
    try {
      url = new URL(settings.url);
    } catch {
      throw new CliError(`--url / NOVA_URL is not a URL: ${redactUrls(settings.url)}`, 2);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError('--url / NOVA_URL must be an http:// or https:// URL', 2);
    // fetch refuses a URL with userinfo (and its error repeats the URL, password included);
    // the gateway takes its credentials as a bearer token, never from the URL.
    if (url.username || url.password) {
      throw new CliError(
        `--url / NOVA_URL must not hold credentials (${redactUrls(url.href)}): pass the token with --admin-token / --api-key`,
        2,
      );
    }
    // The request path is appended to the base: a query or fragment there would swallow it.
    if (url.search || url.hash) throw new CliError(`--url / NOVA_URL must not have a query or fragment: ${redactUrls(url.href)}`, 2);
    this.base = url.href.replace(/\/+$/, '');
  }

  /** Whether the credential was given (flag or env). */
  has(credential: Credential): boolean {
    return Boolean(credential === 'admin' ? this.settings.adminToken : this.settings.apiKey);
  }

  async call<T>(credential: Credential, method: string, path: string, body?: unknown): Promise<T> {
    const { flag, env, what } = CREDENTIALS[credential];
    const secret = credential === 'admin' ? this.settings.adminToken : this.settings.apiKey;
    if (!secret) throw new CliError(`this command needs the ${what}: pass ${flag} or set ${env}`, 2);
    const timeoutMs = this.settings.timeoutMs ?? 15_000;
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, {
        method,
        headers: { authorization: `Bearer ${secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw this.unreachable(error, timeoutMs);
    }
    const text = await response.text();
    if (response.ok) return JSON.parse(text) as T;
    throw this.refused(response.status, text, credential, method, path);
  }

  private unreachable(error: unknown, timeoutMs: number): CliError {
    if ((error as Error).name === 'TimeoutError') return new CliError(`the gateway at ${this.base} did not answer within ${timeoutMs / 1000} s`);
    const code = ((error as Error).cause as { code?: string } | undefined)?.code ?? '';
    const cause = NETWORK_CAUSES[code] ?? ((error as Error).cause as Error | undefined)?.message ?? (error as Error).message;
    return new CliError(`cannot reach the gateway at ${this.base} (${cause}): check --url / NOVA_URL and that the gateway runs`);
  }

  private refused(status: number, text: string, credential: Credential, method: string, path: string): CliError {
    let body: ErrorBody = {};
    try {
      body = JSON.parse(text) as ErrorBody;
    } catch {
      // not the gateway's JSON: a proxy page, another service
    }
    const { message = text.slice(0, 200), code = 'unknown', param } = body.error ?? {};
    const { flag, env, what } = CREDENTIALS[credential];
    if (status === 401) return new CliError(`the gateway refused the ${what} (401 ${code}): check ${flag} / ${env}`);
    if (status === 403 && code === 'project_mismatch') return new CliError(`${message} (403 ${code}): the ${what} belongs to another project`);
    // A key outside its scopes or models (insufficient_scope, model_not_allowed): the message names what it lacks.
    if (status === 403) return new CliError(`${message} (403 ${code}${param ? `, param: ${param}` : ''}): the ${what} may not do this`);
    if (status === 404 && message.startsWith('No route for')) {
      const hint = credential === 'admin' ? ' (the admin API is off when the gateway has no NOVA_ADMIN_TOKEN, and older gateways lack some admin routes)' : '';
      return new CliError(`the gateway at ${this.base} has no route ${method} ${path.split('?')[0]}${hint}`);
    }
    return new CliError(`${message} (${status} ${code}${param ? `, param: ${param}` : ''})`);
  }
}
