export const JAEGER_VERSION: string;
/** Where the cached build is kept: <cache>/jaeger-<version>/jaeger. */
export function jaegerBinaryPath(): string;
/** The binary's path ($NOVA_JAEGER_BINARY, else the cached build, made first when missing). */
export function ensureJaegerBinary(options?: { log?: (line: string) => void }): Promise<string>;
export function jaegerBinary(): Promise<string>;
