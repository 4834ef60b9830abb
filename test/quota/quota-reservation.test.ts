import { describe, expect, it } from 'vitest';
import { QuotaReservation, type Settler } from '../../src/quota/quota-reservation.js';
import type { Reservation } from '../../src/store/quota-types.js';
import type { Charge } from '../../src/quota/request-charge.js';

const reservation = { id: 'r1', slot: 0, rateTokens: 100, dayTokens: null, monthTokens: null, monthCost: null, lease: true } as unknown as Reservation;
const charge: Charge = { tokens: 100, rateTokens: 100, promptTokens: 10, addedOutputLimit: null, cost: 0, pricing: null };

function held() {
  const settled: number[] = [];
  const settler: Settler = { settle: (_project, _reservation, used) => settled.push(used.tokens) };
  return { settled, quota: new QuotaReservation(settler, 'proj_1', reservation, charge) };
}

/** The store settlement (lease release, token correction) waits for the response's end (src/quota/quota-reservation.ts). */
describe('QuotaReservation settlement', () => {
  it('a model call that reports its usage while the response is written is settled when the response ends, once', () => {
    const { settled, quota } = held();
    quota.claim();
    quota.settle(3, 4);
    expect(settled).toEqual([]);
    quota.settle(50, 50);
    quota.responseClosed();
    expect(settled).toEqual([7]);
    quota.responseClosed();
    quota.settle(1, 1);
    expect(settled).toEqual([7]);
  });

  it('usage reported after the response ended is settled at once', () => {
    const { settled, quota } = held();
    quota.claim();
    quota.responseClosed();
    quota.settle(2, 3);
    expect(settled).toEqual([5]);
  });

  it('a reservation no model call claimed is settled as nothing when its response ends', () => {
    const { settled, quota } = held();
    quota.responseClosed();
    expect(settled).toEqual([0]);
  });

  it('a follower owns it past the response: only the follower settles it', () => {
    const { settled, quota } = held();
    quota.claim();
    const owned = quota.follow();
    quota.settle(1, 1);
    quota.responseClosed();
    expect(settled).toEqual([]);
    owned!.settle(20, 30);
    expect(settled).toEqual([50]);
    expect(quota.follow()).toBeNull();
  });

  it('cannot be followed once its usage was reported', () => {
    const { settled, quota } = held();
    quota.claim();
    quota.settle(1, 2);
    expect(quota.follow()).toBeNull();
    quota.responseClosed();
    expect(settled).toEqual([3]);
  });
});
