/**
 * Whether `name` matches `pattern`, where `*` stands for any run of characters (model aliases,
 * a key's model allow-list). No regular expression: patterns may come from key holders and names
 * from clients, and a pattern of many stars would make a backtracking engine's time explode; this
 * walks both once, going back only to the last star (at most name × pattern steps).
 */
export function matchesGlob(pattern: string, name: string): boolean {
  let p = 0;
  let n = 0;
  let star = -1;
  let resume = 0;
  while (n < name.length) {
    if (p < pattern.length && pattern[p] !== '*' && pattern[p] === name[n]) {
      p++;
      n++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      resume = n;
    } else if (star !== -1) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}
