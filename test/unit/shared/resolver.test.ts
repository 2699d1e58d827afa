import { describe, expect, it } from 'vitest';
import { ApplicationResolver } from '../../../shared/resolver.js';
import type { RecordedQuery } from '../../helpers/fake-db.js';
import { FakeQueryable } from '../../helpers/fake-db.js';

/** The App API's table, as the fake database holds it. */
function registry(applications: Record<string, string>) {
  return new FakeQueryable((query: RecordedQuery) => {
    const [names] = query.values as [string[]];
    return names.filter((name) => name in applications).map((name) => ({ id: applications[name], package_name: name }));
  });
}

/** The package names each query asked for. */
const askedFor = (database: FakeQueryable) => database.queries.map((query) => (query.values as [string[]])[0]);

function clock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

describe('ApplicationResolver', () => {
  it('resolves a whole batch with one ANY($1) query, each name asked for once', async () => {
    // Prepare
    const database = registry({ 'com.example.weather': '7', 'com.example.maps': '9007199254740993' });
    const resolver = new ApplicationResolver(300_000);

    // Act
    const ids = await resolver.resolve(database, ['com.example.weather', 'com.example.maps', 'com.example.weather', 'com.example.gone']);

    // Assess
    expect(database.queries).toHaveLength(1);
    expect(database.queries[0]?.text).toContain('package_name = ANY($1');
    expect(database.queries[0]?.text).not.toContain('is_active');
    expect(askedFor(database)).toEqual([['com.example.weather', 'com.example.maps', 'com.example.gone']]);
    expect([...ids]).toEqual([
      ['com.example.weather', '7'],
      ['com.example.maps', '9007199254740993'],
    ]);
  });

  it('asks nothing for an empty batch', async () => {
    // Prepare
    const database = registry({});
    const resolver = new ApplicationResolver(300_000);

    // Act
    const ids = await resolver.resolve(database, []);

    // Assess
    expect(ids.size).toBe(0);
    expect(database.queries).toHaveLength(0);
  });

  it('serves hits from the cache for the TTL and asks only for the names it does not hold', async () => {
    // Prepare
    const time = clock();
    const database = registry({ 'com.example.weather': '7', 'com.example.maps': '8' });
    const resolver = new ApplicationResolver(300_000, time.now);
    await resolver.resolve(database, ['com.example.weather']);
    time.advance(299_999);

    // Act
    const cachedOnly = await resolver.resolve(database, ['com.example.weather']);
    const mixed = await resolver.resolve(database, ['com.example.weather', 'com.example.maps']);

    // Assess
    expect(cachedOnly.get('com.example.weather')).toBe('7');
    expect(mixed.get('com.example.maps')).toBe('8');
    expect(askedFor(database)).toEqual([['com.example.weather'], ['com.example.maps']]);
  });

  it('asks again once the TTL has passed', async () => {
    // Prepare
    const time = clock();
    const applications: Record<string, string> = { 'com.example.weather': '7' };
    const database = registry(applications);
    const resolver = new ApplicationResolver(300_000, time.now);
    await resolver.resolve(database, ['com.example.weather']);
    applications['com.example.weather'] = '70'; // re-registered under a new id
    time.advance(300_000);

    // Act
    const ids = await resolver.resolve(database, ['com.example.weather']);

    // Assess
    expect(askedFor(database)).toEqual([['com.example.weather'], ['com.example.weather']]);
    expect(ids.get('com.example.weather')).toBe('70');
  });

  it('never caches a miss: an app registered after a batch is seen by the next one', async () => {
    // Prepare
    const time = clock();
    const applications: Record<string, string> = {};
    const database = registry(applications);
    const resolver = new ApplicationResolver(300_000, time.now);
    const before = await resolver.resolve(database, ['com.example.new']);
    applications['com.example.new'] = '12';
    time.advance(1_000);

    // Act
    const after = await resolver.resolve(database, ['com.example.new']);

    // Assess
    expect(before.has('com.example.new')).toBe(false);
    expect(after.get('com.example.new')).toBe('12');
    expect(database.queries).toHaveLength(2);
  });

  it('with a TTL of 0 asks every time', async () => {
    // Prepare
    const database = registry({ 'com.example.weather': '7' });
    const resolver = new ApplicationResolver(0);

    // Act
    await resolver.resolve(database, ['com.example.weather']);
    await resolver.resolve(database, ['com.example.weather']);

    // Assess
    expect(database.queries).toHaveLength(2);
  });

  it('forgets everything on clear()', async () => {
    // Prepare
    const database = registry({ 'com.example.weather': '7' });
    const resolver = new ApplicationResolver(300_000);
    await resolver.resolve(database, ['com.example.weather']);

    // Act
    resolver.clear();
    await resolver.resolve(database, ['com.example.weather']);

    // Assess
    expect(database.queries).toHaveLength(2);
  });

  it('propagates a failed query and caches nothing from it', async () => {
    // Prepare
    let fail = true;
    const database = new FakeQueryable(() => {
      if (fail) throw new Error('Connection terminated unexpectedly');
      return [{ id: '7', package_name: 'com.example.weather' }];
    });
    const resolver = new ApplicationResolver(300_000);

    // Act
    const failed = resolver.resolve(database, ['com.example.weather']);
    await expect(failed).rejects.toThrow('Connection terminated unexpectedly');
    fail = false;
    const ids = await resolver.resolve(database, ['com.example.weather']);

    // Assess
    expect(ids.get('com.example.weather')).toBe('7');
    expect(database.queries).toHaveLength(2);
  });
});
