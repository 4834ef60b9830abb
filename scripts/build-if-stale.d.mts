export const STAMP: string;
export function staleReason(root: string): string | null;
export function build(root: string, outDir?: string): void;
export function buildIfStale(root: string): { built: boolean };
