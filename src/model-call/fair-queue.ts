/** A request's place in line for a model's targets: a key's or project's `priority`. */
export type QueuePriority = 'high' | 'normal' | 'low';

/**
 * Turns among the priority classes with waiting requests: high four of every seven, normal two,
 * low one. High goes first, and low is never starved while high keeps arriving.
 */
const CLASS_TURNS: readonly QueuePriority[] = ['high', 'normal', 'high', 'low', 'high', 'normal', 'high'];

/** One priority class: a line per project, served in turn (deficit round robin with a request as the unit). */
class PriorityClass<T> {
  private readonly lines = new Map<string, T[]>();
  /** Projects with waiting requests, in turn order; `next` is the one served next. */
  private readonly turns: string[] = [];
  private next = 0;
  size = 0;

  push(projectId: string, item: T): void {
    let line = this.lines.get(projectId);
    if (!line) {
      this.lines.set(projectId, (line = []));
      // A project that starts waiting joins just before the one served next: it waits one round at most.
      this.turns.splice(this.next, 0, projectId);
      this.next++;
      if (this.next >= this.turns.length) this.next = 0;
    }
    line.push(item);
    this.size++;
  }

  /** The next project's oldest request. */
  shift(): T | undefined {
    if (this.size === 0) return undefined;
    if (this.next >= this.turns.length) this.next = 0;
    const projectId = this.turns[this.next]!;
    const line = this.lines.get(projectId)!;
    const item = line.shift()!;
    this.size--;
    if (line.length === 0) this.dropProject(projectId, this.next);
    else this.next = (this.next + 1) % this.turns.length;
    return item;
  }

  remove(projectId: string, item: T): boolean {
    const line = this.lines.get(projectId);
    const at = line?.indexOf(item) ?? -1;
    if (at < 0) return false;
    line!.splice(at, 1);
    this.size--;
    if (line!.length === 0) this.dropProject(projectId, this.turns.indexOf(projectId));
    return true;
  }

  private dropProject(projectId: string, at: number): void {
    this.lines.delete(projectId);
    this.turns.splice(at, 1);
    if (at < this.next) this.next--;
    if (this.next >= this.turns.length) this.next = 0;
  }
}

/**
 * The requests waiting for a model's targets on this replica (DESIGN.md section 10): by priority
 * class (CLASS_TURNS), and within a class fair across projects (one project's 500 waiting requests
 * do not delay another's one by more than a round). Work per push, shift and removal is bounded by
 * one project's line, itself bounded by the queue's depth.
 */
export class FairQueue<T> {
  private readonly classes: Record<QueuePriority, PriorityClass<T>> = { high: new PriorityClass(), normal: new PriorityClass(), low: new PriorityClass() };
  private turn = 0;

  get size(): number {
    return this.classes.high.size + this.classes.normal.size + this.classes.low.size;
  }

  push(projectId: string, priority: QueuePriority, item: T): void {
    this.classes[priority].push(projectId, item);
  }

  shift(): T | undefined {
    if (this.size === 0) return undefined;
    for (;;) {
      const priority = CLASS_TURNS[this.turn]!;
      this.turn = (this.turn + 1) % CLASS_TURNS.length;
      const item = this.classes[priority].shift();
      if (item !== undefined) return item;
    }
  }

  remove(projectId: string, priority: QueuePriority, item: T): boolean {
    return this.classes[priority].remove(projectId, item);
  }
}
