import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/** The web console's session cookie (docs/console.md): its name, and the header a state-changing call adds. */
export const SESSION_COOKIE = 'nova_session';
export const CSRF_HEADER = 'x-csrf-token';

/** A cookie value longer than this is not opened: nothing proportional to what a client sends before auth. */
const MAX_COOKIE_CHARS = 1024;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Who a session speaks for: the operator (admin token), or one API key (by its secret's hash, never the secret). */
export type SessionSubject = { role: 'admin' } | { role: 'key'; keyHash: string; projectId: string; keyId: string };

export type ConsoleSession = SessionSubject & { id: string; expiresAtMs: number };

interface SealedFields {
  r: 'a' | 'k';
  s: string;
  e: number;
  h?: string;
  p?: string;
  k?: string;
  /** An admin session's mark of the admin token it was opened with: a changed token ends it. */
  a?: string;
}

export interface ConsoleSessionsOptions {
  /** Replicas share it, so a session opened on one is honoured by all: NOVA_CONSOLE_SECRET, else the admin token. */
  secret: string;
  adminToken: string | undefined;
  ttlMs: number;
  now: () => number;
}

const base64url = (bytes: Buffer) => bytes.toString('base64url');

/**
 * Sealed cookies (AES-256-GCM: encrypted and authenticated), so no session table is needed and any
 * replica opens any session; the key's hash inside is not readable from the browser. The CSRF token
 * is an HMAC of the session id: the page reads it from GET /console/session, a cross-site page cannot.
 */
export class ConsoleSessions {
  private readonly sealKey: Buffer;
  private readonly macKey: Buffer;
  private readonly adminMark: string | undefined;

  constructor(private readonly options: ConsoleSessionsOptions) {
    const derive = (info: string) => Buffer.from(hkdfSync('sha256', options.secret, 'nova-console', info, 32));
    this.sealKey = derive('session-cookie');
    this.macKey = derive('csrf');
    this.adminMark = options.adminToken === undefined ? undefined : this.mac(`admin:${options.adminToken}`).slice(0, 22);
  }

  /** A new session: its cookie value and the session it opens to. */
  issue(subject: SessionSubject): { cookie: string; session: ConsoleSession } {
    const session: ConsoleSession = { ...subject, id: base64url(randomBytes(16)), expiresAtMs: this.options.now() + this.options.ttlMs };
    const fields: SealedFields =
      subject.role === 'admin'
        ? { r: 'a', s: session.id, e: session.expiresAtMs, a: this.adminMark }
        : { r: 'k', s: session.id, e: session.expiresAtMs, h: subject.keyHash, p: subject.projectId, k: subject.keyId };
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.sealKey, iv);
    const sealed = Buffer.concat([iv, cipher.update(JSON.stringify(fields), 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return { cookie: base64url(sealed), session };
  }

  /** The session a cookie value holds, or null: forged, damaged, expired, or an admin session of a former admin token. */
  open(cookie: string | undefined): ConsoleSession | null {
    if (cookie === undefined || cookie.length > MAX_COOKIE_CHARS) return null;
    const sealed = Buffer.from(cookie, 'base64url');
    if (sealed.length <= IV_BYTES + TAG_BYTES) return null;
    let fields: SealedFields;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.sealKey, sealed.subarray(0, IV_BYTES));
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
      fields = JSON.parse(plain.toString('utf8')) as SealedFields;
    } catch {
      return null;
    }
    if (!(fields.e > this.options.now())) return null;
    if (fields.r === 'a') {
      return fields.a !== undefined && fields.a === this.adminMark ? { role: 'admin', id: fields.s, expiresAtMs: fields.e } : null;
    }
    if (fields.h === undefined || fields.p === undefined || fields.k === undefined) return null;
    return { role: 'key', keyHash: fields.h, projectId: fields.p, keyId: fields.k, id: fields.s, expiresAtMs: fields.e };
  }

  csrfToken(session: ConsoleSession): string {
    return this.mac(`csrf:${session.id}`);
  }

  /** Constant time: both sides are MACs of equal length when the header is well formed. */
  checkCsrf(session: ConsoleSession, header: string | string[] | undefined): boolean {
    if (typeof header !== 'string') return false;
    const expected = Buffer.from(this.csrfToken(session));
    const given = Buffer.from(header);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private mac(value: string): string {
    return createHmac('sha256', this.macKey).update(value).digest('base64url');
  }
}

/** The session cookie's value from a Cookie header (the first of that name: browsers send the most specific path first). */
export function sessionCookieOf(header: string | undefined): string | undefined {
  if (header === undefined || header.length > 8192) return undefined;
  let found: string | undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === SESSION_COOKIE) found ??= part.slice(eq + 1).trim();
  }
  return found;
}

/** The Set-Cookie value: HttpOnly, SameSite=Strict, Secure behind TLS; an empty value with Max-Age=0 clears it. */
export function sessionCookieHeader(value: string, maxAgeSeconds: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

/** The key the sessions are sealed with: NOVA_CONSOLE_SECRET, else the admin token, else one of this process only. */
export function sessionSecretOf(consoleSecret: string | undefined, adminToken: string | undefined): { secret: string; shared: boolean } {
  const secret = consoleSecret ?? adminToken;
  return secret === undefined ? { secret: randomBytes(32).toString('hex'), shared: false } : { secret, shared: true };
}
