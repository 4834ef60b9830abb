import { CLOSE_BRACE, CLOSE_BRACKET, OPEN_BRACE, OPEN_BRACKET, QUOTE, stringEnd } from '../core/json-codes.js';

/**
 * Whether JSON text nests arrays and objects deeper than `maxDepth`, decided in one pass
 * before JSON.parse (whose recursion, and that of everything that walks the result, can
 * overflow the stack on deep input). Brackets inside strings do not count. The text need
 * not be valid JSON: JSON.parse judges that afterwards. Strings are skipped with indexOf (native)
 * rather than character by character: message text, most of a chat body, costs next to nothing.
 */
export function exceedsJsonDepth(text: string, maxDepth: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === QUOTE) {
      const end = stringEnd(text, i);
      if (end === -1) return false;
      i = end;
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      if (++depth > maxDepth) return true;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}
