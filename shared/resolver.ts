/**
 * Step 3 of a batch (docs/design.md section 3): `package_name -> application_id` for the whole
 * batch in one query, through a per-pipeline cache of hits. The table (`apps_registry_application`)
 * belongs to the App API; this service only reads it.
 */
import type { Queryable } from './queryable.js';

/** Application ids by package name. Ids are BIGINT text, never rounded through `Number`. */
export type ApplicationIds = ReadonlyMap<string, string>;

/**
 * Resolves `package_name -> application_id` through a TTL cache of hits only: a miss is never
 * cached, so an app registered a minute ago is seen on the next batch. No `is_active` filter:
 * data for a soft-deleted app is still stored. One instance per pipeline (nothing shared).
 */
export class ApplicationResolver {
  private readonly cache = new Map<string, { id: string; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Resolves every name with at most ONE query (`= ANY($1)`) for the names not cached. */
  async resolve(client: Queryable, packageNames: Iterable<string>): Promise<ApplicationIds> {
    const now = this.now();
    const found = new Map<string, string>();
    const missing: string[] = [];
    for (const name of new Set(packageNames)) {
      const cached = this.cache.get(name);
      if (cached && cached.expiresAt > now) found.set(name, cached.id);
      else missing.push(name);
    }
    if (missing.length === 0) return found;
    const result = await client.query<{ id: string; package_name: string }>(
      'SELECT id::text AS id, package_name FROM apps_registry_application WHERE package_name = ANY($1::text[])',
      [missing],
    );
    for (const row of result.rows) {
      found.set(row.package_name, row.id);
      if (this.ttlMs > 0) this.cache.set(row.package_name, { id: row.id, expiresAt: now + this.ttlMs });
    }
    return found;
  }

  /** Forgets everything (used when a batch saw a foreign-key violation: an app was hard-deleted). */
  clear(): void {
    this.cache.clear();
  }
}
