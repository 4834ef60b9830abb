import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { pino, type Logger } from 'pino';
import { REDACTED_PATHS } from '../core/logger.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Fields a route adds to the request's one access-log line (model, tokens, outcome, …). */
    logFields: Record<string, unknown> | null;
    accessLogged: boolean;
  }
}

const MESSAGE = 'request completed';
const symbols = pino.symbols;
const quotedKeys = new Map<string, string>();
/** `,"key":`, made once per key (the keys are the gateway's own, a few dozen). */
function member(key: string): string {
  let quoted = quotedKeys.get(key);
  if (quoted === undefined) {
    quoted = `,${JSON.stringify(key)}:`;
    if (quotedKeys.size < 1000) quotedKeys.set(key, quoted);
  }
  return quoted;
}
/** Keys a redaction path starts with: a line holding one goes through pino, which censors it. */
const REDACTED_KEYS = new Set(REDACTED_PATHS.map((path) => path.split('.')[0]));


/** A member of the access line (`,"key":value`), or undefined for a value pino must write (see writeAccessLine). */
function memberOf(key: string, value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return member(key) + JSON.stringify(value);
    case 'number':
      return member(key) + (Number.isFinite(value) ? value : 'null');
    case 'boolean':
      return member(key) + value;
    default:
      return value === null ? `${member(key)}null` : undefined;
  }
}

/** The members every access line starts with, in this order. */
const BASE_KEYS = new Set(['method', 'route', 'status_code', 'response_time_ms', 'project_id', 'client_address']);

/**
 * The access line written directly, in the logger's own format (its level prefix, time, bindings
 * and line end), from the request and the fields its route added, without first merging them into
 * one object. pino's general path runs per-key serializers and the redaction of every key on each
 * line, a few microseconds a request for fields that are the gateway's own. A value that is not a
 * string, number, boolean or null, a key that a redaction path names, that repeats a base key or
 * that the logger serializes, or a logger set up to rewrite lines goes through pino (false).
 */
function writeAccessLine(log: FastifyBaseLogger, request: FastifyRequest, reply: FastifyReply, elapsedMs: number): boolean {
  const internals = log as unknown as Record<symbol, unknown>;
  const prefix = (internals[symbols.lsCacheSym] as Record<number, string> | undefined)?.[30];
  const stream = internals[symbols.streamSym] as { write(line: string): unknown } | undefined;
  const time = internals[symbols.timeSym] as (() => string) | undefined;
  const chindings = internals[symbols.chindingsSym] as string | undefined;
  const end = internals[symbols.endSym] as string | undefined;
  const messageKey = internals[symbols.messageKeySym] as string | undefined;
  if (prefix === undefined || !stream || !time || chindings === undefined || end === undefined || messageKey === undefined) return false;
  // What would change the line (a mixin, a log formatter, a message prefix, a write hook) or needs
  // pino's metadata (a multistream): pino's own path.
  const formatters = internals[symbols.formattersSym] as { log?: unknown } | undefined;
  const hooks = internals[symbols.hooksSym] as { streamWrite?: unknown } | undefined;
  if (internals[symbols.mixinSym] || formatters?.log || hooks?.streamWrite || internals[(symbols as unknown as Record<string, symbol>).msgPrefixSym!]) return false;
  if ((stream as Record<symbol, unknown>)[symbols.needsMetadataGsym] === true) return false;
  const serializers = internals[symbols.serializersSym] as Record<string, unknown> | undefined;
  const projectId = request.principal?.projectId;
  const clientAddress = request.ip;
  let line =
    prefix +
    time() +
    chindings +
    member('method') +
    JSON.stringify(request.method) +
    memberOf('route', request.routeOptions.url ?? null) +
    member('status_code') +
    reply.statusCode +
    member('response_time_ms') +
    elapsedMs +
    (projectId === undefined ? '' : member('project_id') + JSON.stringify(projectId)) +
    // A connection gone before the response ended has no address: left out, as pino leaves out undefined.
    (clientAddress === undefined ? '' : member('client_address') + JSON.stringify(clientAddress));
  const fields = request.logFields;
  for (const key in fields) {
    // Own keys only, as pino writes them.
    if (!Object.hasOwn(fields, key)) continue;
    const value = fields[key];
    if (value === undefined) continue;
    // A key the logger serializes (fastify's `res`, `req`, `err`) is written by pino, through its serializer.
    if (REDACTED_KEYS.has(key) || BASE_KEYS.has(key) || serializers?.[key]) return false;
    const written = memberOf(key, value);
    if (written === undefined) return false;
    line += written;
  }
  stream.write(`${line},${JSON.stringify(messageKey)}:${JSON.stringify(MESSAGE)}${end}`);
  return true;
}

/**
 * One log line per request, written when the response is done, with what the route added.
 * (Fastify's own pair of lines, "incoming request" and "request completed", is switched off:
 * at gateway rates the second line is pure cost.)
 */
export function installAccessLog(app: FastifyInstance): void {
  app.decorateRequest('logFields', null);
  app.decorateRequest('accessLogged', false);
  // Callback hooks: an async one costs every request a promise and a microtask for nothing.
  app.addHook('onResponse', (request, reply, done) => {
    request.accessLogged = true;
    const log = request.log as FastifyBaseLogger & Partial<Pick<Logger, 'isLevelEnabled'>>;
    if (log.isLevelEnabled && !log.isLevelEnabled('info')) return done();
    const elapsedMs = Math.round(reply.elapsedTime * 100) / 100;
    if (!writeAccessLine(log, request, reply, elapsedMs)) {
      const fields = {
        method: request.method,
        route: request.routeOptions.url ?? null,
        status_code: reply.statusCode,
        response_time_ms: elapsedMs,
        project_id: request.principal?.projectId,
        client_address: request.ip,
        ...request.logFields,
      };
      log.info(fields, MESSAGE);
    }
    done();
  });
}

/** Adds fields to the access line; after it was written (an aborted stream ending late), logs them alone. */
export function addLogFields(request: FastifyRequest, fields: Record<string, unknown>, message: string): void {
  if (request.accessLogged) request.log.info(fields, message);
  // The first fields are kept as given (the caller's own object), later ones merged into them.
  else request.logFields = request.logFields === null ? fields : Object.assign(request.logFields, fields);
}
