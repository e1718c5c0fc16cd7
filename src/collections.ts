/**
 * Adds `item` to the list under `key`. Grouping by copying the list at each item
 * (`[...(map.get(key) ?? []), item]`) is quadratic in the group's size: a project of 10,000
 * resources copied 50 million array slots.
 */
export function appendTo<K, V>(groups: Map<K, V[]>, key: K, item: V): void {
  const group = groups.get(key);
  if (group) group.push(item);
  else groups.set(key, [item]);
}

/** The map under `key` in a nested map, made empty the first time. */
export function childOf<K, V extends Map<unknown, unknown>>(parent: Map<K, V>, key: K): V {
  let child = parent.get(key);
  if (!child) parent.set(key, (child = new Map() as V));
  return child;
}

/**
 * A grouping built on first use: `fill` adds every item to its group(s). For indexes a run may
 * never ask (a plan without prunes, an apply without deletes), which then cost nothing.
 */
export function groupsOnFirstUse<K, V>(fill: (add: (key: K, item: V) => void) => void): (key: K) => readonly V[] {
  let groups: Map<K, V[]> | undefined;
  return (key) => {
    if (!groups) {
      const made = new Map<K, V[]>();
      fill((k, item) => appendTo(made, k, item));
      groups = made;
    }
    return groups.get(key) ?? [];
  };
}

/**
 * Appends every item of `items` to `target`. `target.push(...items)` passes each item as an
 * argument: past about 120,000 of them (fewer on a deeper stack) it throws "Maximum call stack
 * size exceeded", a count one config file, a plan or a drift report of a large tenant reaches.
 */
export function pushAll<T>(target: T[], items: readonly T[]): void {
  for (const item of items) target.push(item);
}

/** The largest of `values`, 0 for none (they are lengths), without `Math.max(...values)`'s argument limit (see pushAll). */
export function maxOf(values: Iterable<number>): number {
  let max = 0;
  for (const v of values) if (v > max) max = v;
  return max;
}
