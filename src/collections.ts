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
