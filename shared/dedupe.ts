/**
 * Step 4 of a batch (docs/design.md section 3): de-duplication by natural key within the batch,
 * before the upsert. process-batch.ts runs it with the pipeline's natural key and preference.
 */

/**
 * Keeps one item per natural key, so one upsert statement never touches the same row twice
 * (PostgreSQL refuses that in `ON CONFLICT DO UPDATE` and aborts the whole statement).
 * `prefer(candidate, kept)` says whether a later item replaces the kept one; by default the
 * first wins. Order of the survivors follows their first appearance.
 */
export function dedupeByKey<T>(
  items: readonly T[],
  keyOf: (item: T) => string,
  prefer: (candidate: T, kept: T) => boolean = () => false,
): { kept: T[]; dropped: number } {
  const byKey = new Map<string, T>();
  for (const item of items) {
    const key = keyOf(item);
    const kept = byKey.get(key);
    if (kept === undefined || prefer(item, kept)) byKey.set(key, item);
  }
  return { kept: [...byKey.values()], dropped: items.length - byKey.size };
}
