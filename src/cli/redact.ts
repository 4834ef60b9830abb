/** Query parameters whose values are treated as secrets when a URL is printed. */
const SECRET_PARAM = /pass|pwd|token|secret|key|auth|sig|credential|session/i;

/**
 * `text` with every URL in it as the CLI may print it: the userinfo (`user:password@`; a
 * user alone can be a token too) becomes `***@`, and the values of secret-looking query
 * parameters become `***`. Works on text that does not parse as a URL as well, since a
 * malformed --url is echoed in its error.
 */
export function redactUrls(text: string): string {
  return text
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#]*@/gi, '$1***@')
    .replace(/([?&]([^=&#\s]*)=)[^&#\s]*/g, (whole, prefix: string, name: string) => (SECRET_PARAM.test(name) ? `${prefix}***` : whole));
}
