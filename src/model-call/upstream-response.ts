import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';

/** What a target answered: an HTTP upstream's response, or the echo provider's in-process one. */
export interface UpstreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Readable;
  /** The whole body, when the call asked for it so (`CallOptions.wholeLimit`): read it instead of `body`. */
  whole?: Promise<Buffer>;
}
