export const STAMP: string;
export const CONSOLE_STAMP: string;
export function staleReason(root: string): string | null;
export function build(root: string, outDir?: string): void;
export function buildIfStale(root: string): { built: boolean };
export function consoleStaleReason(root: string): string | null;
export function buildConsole(root: string): void;
export function buildAll(root: string): void;
export function buildConsoleIfStale(root: string): { built: boolean };
