import { UsageError } from './command.js';

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;

/**
 * A duration such as `30d`, `12h`, `90m`, `45s`, `2w` or `500ms` in milliseconds.
 * @throws UsageError naming `option` for anything else.
 */
export function parseDuration(text: string, option: string): number {
  const match = /^(\d+)(ms|[smhdw])$/.exec(text.trim());
  const amount = match ? Number(match[1]) : Number.NaN;
  const ms = match ? amount * UNIT_MS[match[2] as keyof typeof UNIT_MS] : Number.NaN;
  if (!Number.isSafeInteger(ms)) {
    throw new UsageError(`${option} must be a duration such as 30d, 12h, 90m, 45s, 2w or 500ms, got ${JSON.stringify(text)}`);
  }
  return ms;
}

// A date, optionally a time (seconds and fraction optional), optionally an offset; no offset = UTC.
const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)(Z|[+-]\d{2}:\d{2})?)?$/;

/** Whether year-month-day names a real day (`Date` would roll 2026-02-30 over to March). */
function isRealDay(year: number, month: number, day: number): boolean {
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/**
 * An ISO 8601 instant (`2026-11-30`, `2026-11-30T06:00`, `2026-11-30T06:00:00.5+03:30` ...);
 * without an offset it is UTC, like the message timestamps.
 * @throws UsageError naming `option` for anything else.
 */
export function parseInstant(text: string, option: string): Date {
  const match = ISO_INSTANT.exec(text.trim());
  const [, year = '', month = '', day = '', time = '00:00', offset = 'Z'] = match ?? [];
  const date = new Date(`${year}-${month}-${day}T${time}${offset}`);
  if (!match || !isRealDay(Number(year), Number(month), Number(day)) || Number.isNaN(date.getTime())) {
    throw new UsageError(`${option} must be an ISO timestamp such as 2026-11-30T06:00:00Z, got ${JSON.stringify(text)}`);
  }
  return date;
}

/** `--since`: an ISO instant, or a duration meaning that long ago (`24h`). */
export function parseSince(text: string, option: string, now: number = Date.now()): Date {
  return /^\d+[smhdw]$/.test(text.trim()) ? new Date(now - parseDuration(text, option)) : parseInstant(text, option);
}

/**
 * An instant as ISO 8601 for people; `-` when absent. PostgreSQL holds instants up to the year
 * 294276 and a dead letter's Kafka timestamp may be any safe integer of milliseconds, beyond
 * the year 275760 where a JavaScript Date ends (node-postgres then gives an invalid Date).
 */
export function instantText(instant: Date | null): string {
  if (instant === null) return '-';
  return Number.isNaN(instant.getTime()) ? 'after the year 275760 (beyond JavaScript dates)' : instant.toISOString();
}
