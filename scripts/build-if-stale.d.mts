export const STAMP: string;
export function staleReason(root: string): string | null;
export function buildIfStale(root: string): { built: boolean };
