import { ReplyError } from 'ioredis';
import { StoreUnavailableError } from '../types.js';

const TRANSIENT_REPLY = /^(LOADING|CLUSTERDOWN|MASTERDOWN|TRYAGAIN|READONLY|BUSY)\b/;

/**
 * A Redis reply error is a bug of ours and propagates as such; anything else
 * (closed connection, timeout, offline) means the store cannot be reached.
 */
export async function guard<T>(operation: Promise<T>): Promise<T> {
  try {
    return await operation;
  } catch (error) {
    if (error instanceof ReplyError && !TRANSIENT_REPLY.test((error as Error).message)) throw error;
    throw new StoreUnavailableError(error);
  }
}
