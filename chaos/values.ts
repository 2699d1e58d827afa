/**
 * Values of the chaos workload, each with the text PostgreSQL must give back: instants are
 * integer microseconds (never a JS `Date` for the fraction), written in many producer forms.
 */
import type { ChaosApp } from './plan.js';
import type { Random } from './random.js';

// ---- time: integer microseconds since the epoch --------------------------------------------

/** Microseconds in an hour. */
export const MICROS_PER_HOUR = 3_600_000_000;
const BASE_MICROS = Date.UTC(2026, 0, 1) * 1000;
/** `value` in `width` digits. */
export const pad = (value: number, width: number) => String(value).padStart(width, '0');

/** `YYYY-MM-DDTHH:MM:SS.ffffff` in UTC: what the checker reads back. */
export function utcText(micros: number): string {
  return `${new Date(Math.floor(micros / 1000)).toISOString().slice(0, 19)}.${pad(micros % 1_000_000, 6)}`;
}

const OFFSETS = ['+03:30', '-07:00', '+05:45', '-00:00', '+14:00', '-12:00', '+00:00'];

/** The instant as a producer might write it: Z, no offset (UTC), or another offset; fraction cut. */
export function writtenTimestamp(micros: number, random: Random): string {
  const form = random.int(0, 9);
  const offset = form < 3 ? 'Z' : form < 6 ? '' : random.pick(OFFSETS);
  const minutes =
    offset === '' || offset === 'Z'
      ? 0
      : (offset.startsWith('-') ? -1 : 1) * (Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4, 6)));
  const local = new Date(Math.floor(micros / 1000) + minutes * 60_000).toISOString().slice(0, 19);
  let fraction = pad(micros % 1_000_000, 6);
  if (random.chance(0.5)) fraction = fraction.replace(/0+$/, '');
  return `${local}${fraction === '' ? '' : `.${fraction}`}${offset}`;
}

/** An instant within the hour `hour` after the base; one in ten on a whole second. */
export function instant(hour: number, random: Random): number {
  const within = random.chance(0.1) ? random.int(0, 3599) * 1_000_000 : random.int(0, MICROS_PER_HOUR - 1);
  return BASE_MICROS + hour * MICROS_PER_HOUR + within;
}

// ---- text -------------------------------------------------------------------------------------

const WORDS = [
  'good',
  'app',
  'crashes',
  'widget',
  'forecast',
  'عالی',
  'برنامه',
  '很好',
  '天気',
  'größe',
  'naïve',
  '\u{1F326}',
  '\u{1F44D}',
  '\u{1F469}\u200d\u{1F4BB}',
  'e\u0301',
  '"quoted"',
  'back\\slash',
  'tab\there',
  'line\nbreak',
];

/** `words` words of mixed scripts, emoji and characters JSON must escape. */
export function sentence(random: Random, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(random.pick(WORDS));
  return out.join(' ');
}

/** A string of exactly `count` code points (multi-byte when `exotic`). */
export function codePoints(random: Random, count: number, exotic: boolean): string {
  const alphabet = exotic ? ['\u{1F600}', '中', 'é', 'a', 'ش'] : ['a', 'b', 'c', 'x', '1', '.'];
  let out = '';
  for (let i = 0; i < count; i++) out += random.pick(alphabet);
  return out;
}

/** An app version: usually `x.y.z`, sometimes 64 emoji and CJK characters. */
export function version(random: Random): string {
  if (random.chance(0.02)) return codePoints(random, 64, true);
  return `${random.int(1, 9)}.${random.int(0, 20)}.${random.int(0, 9)}`;
}

/** A BIGINT-column count: usually modest, sometimes the largest exact integer. */
export function count(random: Random): number {
  if (random.chance(0.02)) return Number.MAX_SAFE_INTEGER - random.int(0, 5);
  return random.chance(0.5) ? random.int(0, 100_000) : random.int(0, 2_000_000_000_000);
}

// ---- the apps ---------------------------------------------------------------------------------

/** The apps the run registers: exotic names, the largest exact id, some inactive (soft-deleted). */
export function chaosApps(): ChaosApp[] {
  const apps: ChaosApp[] = [];
  for (let i = 0; i < 40; i++) {
    const packageName =
      i === 3
        ? 'com.chaos.天気'
        : i === 5
          ? `com.chaos.${'\u{1F326}'.repeat(20)}`
          : i === 7
            ? `com.chaos.${'x'.repeat(245)}`
            : `com.chaos.app${i}`;
    apps.push({ id: i === 11 ? String(Number.MAX_SAFE_INTEGER) : String(7000 + i), packageName, active: i % 10 !== 9 });
  }
  return apps;
}

/** Package names nobody registers. */
export const UNKNOWN_PACKAGES = ['com.chaos.unregistered-1', 'com.chaos.unregistered-2', 'com.chaos.Unregistered-3'];
