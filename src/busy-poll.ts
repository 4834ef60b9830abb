/**
 * Keeps the event loop polling instead of sleeping while a request waits on a fast reply (the
 * admission's Redis call, an upstream's response headers), for at most `budgetUs` after the
 * latest such wait began.
 *
 * Why: a process that sleeps in epoll gives its CPU back, and on a VM (or a CPU in a deep idle
 * state) waking it again costs tens of microseconds per reply. A request at low load waits for two
 * replies, so it pays that twice. Polling keeps the CPU awake: the reply is seen at once. It costs
 * CPU only while the loop would otherwise sleep (a busy replica never sleeps), but it does raise
 * the CPU a replica shows at low and medium load, which is why it is off unless configured
 * (`server.busy_poll_us`): do not combine it with autoscaling on CPU.
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

  /** A wait begins; `release` must follow once it is over, however it ends. */
  hold(): void {
    if (this.budgetMs <= 0) return;
    this.waiting++;
    const now = performance.now();
    this.deadline = now + this.budgetMs;
    if (this.spinning) return;
    this.spinning = true;
    this.spinStartedAt = now;
    setImmediate(this.spin);
  }

  release(): void {
    if (this.budgetMs <= 0) return;
    this.waiting--;
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
