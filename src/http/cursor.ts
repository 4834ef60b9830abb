import { invalidParameter } from './errors.js';

/** Opaque page cursors: clients pass them back unchanged and never build them. */
export function encodeCursor(position: string): string {
  return Buffer.from(`v1:${position}`).toString('base64url');
}

export function decodeCursor(cursor: string, isPosition: (value: string) => boolean, param = 'cursor'): string {
  const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
  const position = decoded.startsWith('v1:') ? decoded.slice(3) : '';
  if (!isPosition(position)) throw invalidParameter('The cursor is not one this API returned.', param);
  return position;
}
