import { expect } from 'vitest';
import { ApiError } from '../../../src/http/errors.js';

/** The 400 `run` throws: its status, error type and param. */
export function rejection(run: () => unknown): { status: number; type: string; param: string | undefined } {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    const { statusCode, type, param } = error as ApiError;
    return { status: statusCode, type, param };
  }
  throw new Error('expected a rejection');
}
