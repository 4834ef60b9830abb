/**
 * Work gathered by key during one event-loop turn: `of` gives the key's batch of the current turn
 * (made by `open` on first use). Once the turn is over every batch goes to `close` and the next
 * turn starts afresh, so what a busy replica asks of Redis within a turn leaves in one call or one
 * write, and a lone request still leaves within the turn it arrived in.
 */
export class TurnBatches<B> {
  private batches = new Map<string, B>();
  private scheduled = false;

  /**
   * `close` sends a batch; `around`, when given, runs each round of closing (every batch of a turn,
   * or one full batch): a Redis store passes inOneWrite, so that what the batches send leaves in one write.
   */
  constructor(
    private readonly close: (batch: B, key: string) => void,
    private readonly around: (closing: () => void) => void = (closing) => closing(),
  ) {}

  /** `open(arg)` makes the batch; a function that needs no closure keeps the request path free of one. */
  of<A>(key: string, open: (arg: A) => B, arg: A): B {
    let batch = this.batches.get(key);
    if (batch === undefined) {
      batch = open(arg);
      this.batches.set(key, batch);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.closeAll());
      }
    }
    return batch;
  }

  /** Closes a key's batch before the turn is over (a full one); the key's next work opens another. */
  closeNow(key: string): void {
    const batch = this.batches.get(key);
    if (batch === undefined) return;
    this.batches.delete(key);
    this.around(() => this.close(batch, key));
  }

  private closeAll(): void {
    this.scheduled = false;
    const batches = this.batches;
    this.batches = new Map();
    this.around(() => {
      for (const [key, batch] of batches) this.close(batch, key);
    });
  }
}
