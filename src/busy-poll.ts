/**
 * How one kind of wait has gone lately (the admission's store call, one upstream's response
 * headers): the share of its recent waits that ended within the polling budget, as a moving
 * average over about the last 16.
 */
export class WaitPace {
  shortShare = 1;
}

/** One wait in progress: `BusyPoll.release` takes it back. */
export interface HeldWait {
  readonly pace: WaitPace | undefined;
  readonly startedAt: number;
  readonly polled: boolean;
}

const NOT_WATCHED: HeldWait = { pace: undefined, startedAt: 0, polled: false };
/** Weight of the latest wait in a pace's share. */
const PACE_WEIGHT = 1 / 16;

/**
 * Keeps the event loop polling instead of sleeping while a request waits on a fast reply (the
 * admission's Redis call, an upstream's response headers), for at most `budgetUs` after the
 * latest such wait began, and only for a kind of wait that is usually fast: one whose recent
 * waits ended within the budget at least half the time (`WaitPace`).
 *
 * Why: a process that sleeps in epoll gives its CPU back, and on a VM (or a CPU in a deep idle
 * state) waking it again costs tens of microseconds per reply, and the code that runs next runs
 * on cold caches. A request at low load waits for two replies, so it pays that twice. Polling keeps
 * the CPU awake: the reply is seen at once. A busy replica never sleeps, so there it costs nothing.
 * At low load it costs at most the wait itself, and only for waits that are usually shorter than
 * the budget (a Redis round trip, a nearby fast upstream); an upstream that takes milliseconds to
 * answer, as a model usually does, stops being polled after a few of its waits, and is polled
 * again once its waits are short again. `server.busy_poll_us: 0` turns it off.
 */
export class BusyPoll {
  private waiting = 0;
  private deadline = 0;
  private spinning = false;
  private spinStartedAt = 0;
  private readonly budgetMs: number;

  /** `onPolled` is told the seconds of each stretch spent polling (a metric). */
  constructor(
    budgetUs: number,
    private readonly onPolled: (seconds: number) => void = () => undefined,
  ) {
    this.budgetMs = budgetUs / 1000;
  }

  /** A wait of this kind begins; `release` must follow once it is over, however it ends. */
  hold(pace: WaitPace): HeldWait {
    if (this.budgetMs <= 0) return NOT_WATCHED;
    const now = performance.now();
    if (pace.shortShare < 0.5) return { pace, startedAt: now, polled: false };
    this.waiting++;
    this.deadline = now + this.budgetMs;
    if (!this.spinning) {
      this.spinning = true;
      this.spinStartedAt = now;
      setImmediate(this.spin);
    }
    return { pace, startedAt: now, polled: true };
  }

  release(wait: HeldWait): void {
    const { pace } = wait;
    if (pace === undefined) return;
    if (wait.polled) this.waiting--;
    const short = performance.now() - wait.startedAt <= this.budgetMs ? 1 : 0;
    pace.shortShare += (short - pace.shortShare) * PACE_WEIGHT;
  }

  // A pending immediate makes libuv poll without blocking; the chain ends when nobody waits or the
  // budget is spent, and the loop sleeps again.
  private readonly spin = (): void => {
    const now = performance.now();
    if (this.waiting > 0 && now < this.deadline) {
      setImmediate(this.spin);
      return;
    }
    this.spinning = false;
    this.onPolled((now - this.spinStartedAt) / 1000);
  };
}
