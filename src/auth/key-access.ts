import { insufficientScope, modelNotAllowed } from '../http/errors.js';
import type { KeyPrincipal } from '../store/types.js';
import { matchesGlob } from '../core/glob.js';

/** What a key may do (DESIGN.md section 9): each /v1 route declares the one it needs (`config.scope`). */
export const SCOPES = ['model', 'usage:read', 'keys:read', 'keys:write', 'project:write', 'conversations:read'] as const;
export type Scope = (typeof SCOPES)[number];

const BIT = new Map<string, number>(SCOPES.map((scope, index) => [scope, 1 << index]));
const ALL = (1 << SCOPES.length) - 1;

export const isScope = (value: unknown): value is Scope => typeof value === 'string' && BIT.has(value);

/** A key's scopes as a bitmask; null (a key stored before scopes existed) has them all, so no deployment locks out. */
export function scopeMask(scopes: readonly string[] | null | undefined): number {
  if (scopes === null || scopes === undefined) return ALL;
  let mask = 0;
  for (const scope of scopes) mask |= BIT.get(scope) ?? 0;
  return mask;
}

export const scopesOfMask = (mask: number): Scope[] => SCOPES.filter((scope) => (mask & BIT.get(scope)!) !== 0);

/**
 * A key's model allow-list, compiled once when its principal enters the key cache
 * (src/auth/key-cache.ts): exact ids in a set, `*` patterns matched by src/core/glob.ts.
 */
export class ModelAllowList {
  private readonly exact: Set<string>;
  private readonly globs: string[];

  constructor(readonly patterns: readonly string[]) {
    this.exact = new Set(patterns.filter((pattern) => !pattern.includes('*')));
    this.globs = patterns.filter((pattern) => pattern.includes('*'));
  }

  matches(name: string): boolean {
    return this.exact.has(name) || this.globs.some((pattern) => matchesGlob(pattern, name));
  }
}

/** What the authenticator hands the routes: scopes as a bitmask, models as a compiled list (null: every model). */
export interface KeyAccess {
  readonly scopes: number;
  readonly models: ModelAllowList | null;
}

export function compileAccess(scopes: readonly string[] | null | undefined, models: readonly string[] | null | undefined): KeyAccess {
  return { scopes: scopeMask(scopes), models: models === null || models === undefined ? null : new ModelAllowList(models) };
}

/** A principal as the key cache holds it: its access compiled once, so each request's check is a bit test. */
export type AuthenticatedKey = KeyPrincipal & { readonly access: KeyAccess };

export const withAccess = (principal: KeyPrincipal): AuthenticatedKey => ({ ...principal, access: compileAccess(principal.scopes, principal.models) });

export const hasScope = (access: KeyAccess, scope: Scope): boolean => (access.scopes & BIT.get(scope)!) !== 0;

export function requireScope(access: KeyAccess, scope: Scope): void {
  if (!hasScope(access, scope)) throw insufficientScope(scope);
}

/**
 * A model name is allowed when the list matches the name the client sent or the configured model it
 * resolves to (`models[].aliases`, src/core/model-names.ts): listing a configured id allows all its
 * aliases, and listing an alias allows that name. Either way the admin's config decides where a name
 * leads, so a key cannot reach a model through a name that is not on its list or an alias of one.
 */
export function allowsModel(access: KeyAccess, name: string, configuredId: string | undefined): boolean {
  return access.models === null || access.models.matches(name) || (configuredId !== undefined && access.models.matches(configuredId));
}

export function requireModel(access: KeyAccess, name: string, configuredId: string | undefined, param = 'model'): void {
  if (!allowsModel(access, name, configuredId)) throw modelNotAllowed(name, param);
}
