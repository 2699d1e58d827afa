/**
 * A small seeded pseudo-random generator (sfc32, seeded through splitmix32): the same seed gives
 * the same workload and the same fault schedule, so a failing run can be replayed.
 */
export interface Random {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [min, max], both inclusive. */
  int(min: number, max: number): number;
  /** True with probability `p`. */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** `count` lower-case hexadecimal digits. */
  hex(count: number): string;
  /** A new generator whose sequence depends only on this one's seed and `label`. */
  fork(label: string): Random;
}

function splitmix32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

function hashLabel(label: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < label.length; i++) hash = Math.imul(hash ^ label.charCodeAt(i), 0x01000193) >>> 0;
  return hash;
}

/** A generator for `seed` (any 32-bit unsigned integer). */
export function createRandom(seed: number): Random {
  const init = splitmix32(seed);
  let a = init();
  let b = init();
  let c = init();
  let d = init();
  const next32 = (): number => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = ((c << 21) | (c >>> 11)) >>> 0;
    c = (c + t) >>> 0;
    return t;
  };
  for (let i = 0; i < 12; i++) next32();
  const random: Random = {
    next: () => next32() / 4_294_967_296,
    int: (min, max) => min + Math.floor(random.next() * (max - min + 1)),
    chance: (p) => random.next() < p,
    pick: (items) => {
      if (items.length === 0) throw new RangeError('pick from an empty list');
      return items[random.int(0, items.length - 1)] as (typeof items)[number];
    },
    hex: (count) => {
      let out = '';
      while (out.length < count) out += next32().toString(16).padStart(8, '0');
      return out.slice(0, count);
    },
    fork: (label) => createRandom((seed ^ hashLabel(label)) >>> 0),
  };
  return random;
}
