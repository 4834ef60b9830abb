import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { TurnBatches } from '../../src/store/redis/turn-batches.js';

describe('TurnBatches', () => {
  it('gathers one batch per key during a turn, closes them all after it, and starts afresh', async () => {
    const closed: Array<[string, string[]]> = [];
    const batches = new TurnBatches<string[]>((batch, key) => closed.push([key, batch]));
    const open = () => [] as string[];
    batches.of('a', open, undefined).push('a1');
    batches.of('b', open, undefined).push('b1');
    batches.of('a', open, undefined).push('a2');
    expect(closed).toEqual([]);
    await nextTurn();
    expect(closed).toEqual([
      ['a', ['a1', 'a2']],
      ['b', ['b1']],
    ]);
    batches.of('a', open, undefined).push('a3');
    await nextTurn();
    expect(closed.at(-1)).toEqual(['a', ['a3']]);
    expect(closed).toHaveLength(3);
  });

  it('closes one batch early on demand; the key then opens a new one in the same turn', async () => {
    const closed: string[][] = [];
    const batches = new TurnBatches<string[]>((batch) => closed.push(batch));
    batches.of('a', () => [], undefined).push('full');
    batches.closeNow('a');
    expect(closed).toEqual([['full']]);
    batches.of('a', () => [], undefined).push('next');
    batches.closeNow('missing');
    await nextTurn();
    expect(closed).toEqual([['full'], ['next']]);
  });

  it('runs each round of closing inside `around`: every batch of a turn at once, a full batch alone', async () => {
    const events: string[] = [];
    const batches = new TurnBatches<string[]>(
      (batch, key) => events.push(`close ${key}:${batch.join(',')}`),
      (closing) => {
        events.push('begin');
        closing();
        events.push('end');
      },
    );
    batches.of('a', () => [], undefined).push('a1');
    batches.of('b', () => [], undefined).push('b1');
    batches.of('c', () => [], undefined).push('c1');
    batches.closeNow('c');
    await nextTurn();
    expect(events).toEqual(['begin', 'close c:c1', 'end', 'begin', 'close a:a1', 'close b:b1', 'end']);
  });
});
