import { ReplyError, type ChainableCommander } from 'ioredis';
import { StoreUnavailableError } from '../types.js';

const TRANSIENT_REPLY = /^(LOADING|CLUSTERDOWN|MASTERDOWN|TRYAGAIN|READONLY|BUSY)\b/;

/**
 * A Redis reply error is a bug of ours and propagates as such; anything else
 * (closed connection, timeout, offline, a server still loading) means the store cannot be reached.
 */
function classify(error: unknown): Error {
  if (error instanceof ReplyError && !TRANSIENT_REPLY.test((error as Error).message)) return error as Error;
  return new StoreUnavailableError(error);
}

export async function guard<T>(operation: Promise<T>): Promise<T> {
  try {
    return await operation;
  } catch (error) {
    throw classify(error);
  }
}

/**
 * Runs a pipeline or MULTI and returns its replies. exec() resolves even when single
 * commands failed (timed out, connection lost): each carries its own error, raised here.
 */
export async function execAll(batch: ChainableCommander): Promise<unknown[]> {
  const results = await guard(batch.exec());
  if (results === null) throw new StoreUnavailableError(new Error('transaction discarded'));
  return results.map(([error, value]) => {
    if (error) throw classify(error);
    return value;
  });
}
