// A min-heap of (expiry, id): the replay record finds what expired in O(log n) per entry instead
// of scanning every live entry on each claim (the cost of a claim must not grow with the record).
export interface Expiring {
  expiresAt: number;
  id: string;
}

export class ExpiryHeap {
  readonly #items: Expiring[] = [];

  get size(): number {
    return this.#items.length;
  }

  push(expiresAt: number, id: string): void {
    const items = this.#items;
    items.push({ expiresAt, id });
    let at = items.length - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (!earlier(items, at, parent)) break;
      swap(items, at, parent);
      at = parent;
    }
  }

  /** Removes and returns the earliest entry when it expired before `now`; undefined otherwise. */
  popBefore(now: number): Expiring | undefined {
    const items = this.#items;
    const top = items[0];
    if (top === undefined || top.expiresAt >= now) return undefined;
    const last = items.pop();
    if (last !== undefined && items.length > 0) {
      items[0] = last;
      let at = 0;
      for (;;) {
        const left = 2 * at + 1;
        const right = left + 1;
        let least = at;
        if (left < items.length && earlier(items, left, least)) least = left;
        if (right < items.length && earlier(items, right, least)) least = right;
        if (least === at) break;
        swap(items, at, least);
        at = least;
      }
    }
    return top;
  }
}

function earlier(items: readonly Expiring[], a: number, b: number): boolean {
  return (
    (items[a]?.expiresAt ?? Number.POSITIVE_INFINITY) < (items[b]?.expiresAt ?? Number.POSITIVE_INFINITY)
  );
}

function swap(items: Expiring[], a: number, b: number): void {
  const held = items[a];
  const other = items[b];
  if (held === undefined || other === undefined) return;
  items[a] = other;
  items[b] = held;
}
