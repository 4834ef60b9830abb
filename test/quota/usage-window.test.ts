import { describe, expect, it } from 'vitest';
import { coveredWindow } from '../../src/routes/management/usage-query.js';
import { HOUR_MS } from '../../src/store/usage-types.js';

/** The off-by-a-minute cases of DESIGN.md section 7, on an injected clock. */
describe('usage window (covered edges, granularity, retention)', () => {
  const at = (iso: string) => Date.parse(iso);
  const retention = { minuteMs: 2 * HOUR_MS, hourMs: 3 * 24 * HOUR_MS };
  const now = at('2026-03-10T12:30:45.500Z');
  const covered = (start: string, end: string, widthMs?: number) => {
    const window = coveredWindow(at(start), at(end), now, retention, widthMs);
    return { granularity: window.granularity, start: new Date(window.startMs).toISOString(), end: new Date(window.endMs).toISOString() };
  };

  it('widens a start in mid-minute to the start of its minute (the minute it falls in counts whole)', () => {
    expect(covered('2026-03-10T12:10:30Z', '2026-03-10T12:20:00Z')).toEqual({
      granularity: 'minute',
      start: '2026-03-10T12:10:00.000Z',
      end: '2026-03-10T12:20:00.000Z',
    });
  });

  it('widens an end in mid-minute to the end of its minute, and keeps an end on an edge (end excluded)', () => {
    expect(covered('2026-03-10T12:10:00Z', '2026-03-10T12:20:00.001Z').end).toBe('2026-03-10T12:21:00.000Z');
    expect(covered('2026-03-10T12:10:00Z', '2026-03-10T12:20:00Z').end).toBe('2026-03-10T12:20:00.000Z');
    expect(covered('2026-03-10T12:10:00Z', '2026-03-10T12:19:59.999Z').end).toBe('2026-03-10T12:20:00.000Z');
  });

  it('answers a window shorter than a bucket (one second, one millisecond) with the whole bucket', () => {
    expect(covered('2026-03-10T12:29:59Z', '2026-03-10T12:30:00Z')).toEqual({
      granularity: 'minute',
      start: '2026-03-10T12:29:00.000Z',
      end: '2026-03-10T12:30:00.000Z',
    });
    expect(covered('2026-03-10T12:30:00Z', '2026-03-10T12:30:00.001Z')).toEqual({
      granularity: 'minute',
      start: '2026-03-10T12:30:00.000Z',
      end: '2026-03-10T12:31:00.000Z',
    });
  });

  it('clips the end to the current bucket: a window reaching into the future ends with the minute now is in', () => {
    expect(covered('2026-03-10T12:29:30Z', '9999-12-31T23:59:59Z')).toEqual({
      granularity: 'minute',
      start: '2026-03-10T12:29:00.000Z',
      end: '2026-03-10T12:31:00.000Z',
    });
  });

  it('switches to hours exactly where the oldest kept minute is passed', () => {
    // now's minute is 12:30; two hours of minutes: 10:30 is the oldest one kept.
    expect(covered('2026-03-10T10:30:00Z', '2026-03-10T11:00:00Z').granularity).toBe('minute');
    expect(covered('2026-03-10T10:30:59.999Z', '2026-03-10T11:00:00Z')).toMatchObject({ granularity: 'minute', start: '2026-03-10T10:30:00.000Z' });
    expect(covered('2026-03-10T10:29:59.999Z', '2026-03-10T11:00:00Z')).toEqual({
      granularity: 'hour',
      start: '2026-03-10T10:00:00.000Z',
      end: '2026-03-10T11:00:00.000Z',
    });
    // An hour answer's end also widens to an hour edge, clipped to the hour now is in.
    expect(covered('2026-03-10T09:15:00Z', '2026-03-10T12:00:01Z')).toEqual({
      granularity: 'hour',
      start: '2026-03-10T09:00:00.000Z',
      end: '2026-03-10T13:00:00.000Z',
    });
  });

  it('clips the widest window to the retained hours, and a window wholly before them to nothing', () => {
    expect(covered('0001-01-01T00:00:00Z', '9999-12-31T23:59:59Z')).toEqual({
      granularity: 'hour',
      start: '2026-03-07T12:00:00.000Z',
      end: '2026-03-10T13:00:00.000Z',
    });
    const old = covered('2020-01-01T00:00:00Z', '2020-01-02T00:00:00Z');
    expect(old.granularity).toBe('hour');
    expect(old.start).toBe(old.end);
  });

  it('widens to the bucket_width edges, UTC-aligned', () => {
    expect(covered('2026-03-10T11:10:00Z', '2026-03-10T11:20:00Z', HOUR_MS)).toEqual({
      granularity: 'minute',
      start: '2026-03-10T11:00:00.000Z',
      end: '2026-03-10T12:00:00.000Z',
    });
    // A day bucket cannot reach before the oldest kept minute: clipped there.
    expect(covered('2026-03-10T11:10:00Z', '2026-03-10T11:20:00Z', 24 * HOUR_MS)).toMatchObject({
      start: '2026-03-10T10:30:00.000Z',
      end: '2026-03-10T12:31:00.000Z',
    });
  });
});
