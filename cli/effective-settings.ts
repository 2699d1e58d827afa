import { catalogVariables } from '../config/setting-declarations.js';
import { readHostSettings } from '../config/host-settings.js';
import type { Environment } from '../shared/env.js';
import { SettingsReader } from '../shared/setting.js';
import type { Secret, Setting, SettingReading, SettingSource, Tier, Unit } from '../shared/setting.js';
import {
  POWERTOOLS_LOG_LEVEL,
  POWERTOOLS_METRICS_NAMESPACE,
  STORAGE_ACTOR,
  STORAGE_DB_SECRET_ID,
  STORAGE_MIGRATIONS_DIR,
} from '../shared/setting-declarations.js';

/** What `storage-consumer config` shows of one variable. */
export interface EffectiveSetting {
  readonly name: string;
  readonly tier: Tier;
  /** The effective value as text, secrets redacted; `null` when unset without a default. */
  readonly value: string | null;
  /** The value's unit, when it has one (ms, s, bytes ...). */
  readonly unit?: Unit;
  readonly source: SettingSource;
  /** A default taken from other settings: which. */
  readonly from?: string;
  /** `false`: no loader reads it with these settings (e.g. `STORAGE_LAMBDA_REGION` in-process). */
  readonly used: boolean;
  /** Refused on its own or by a rule between settings it takes part in (`problems` says how). */
  readonly invalid: boolean;
  /** Why the value itself is refused, when it is. */
  readonly problem?: string;
}

/** The effective settings of an environment and every problem with them. */
export interface EffectiveSettings {
  readonly settings: readonly EffectiveSetting[];
  readonly problems: readonly string[];
}

/** What a redacted secret shows. */
const REDACTED = '***';

/** A secret's text as `config` shows it: a URL keeps all but its password (in the user part or a `password=` parameter). */
export function redact(text: string, secret: Secret | undefined): string {
  if (secret === undefined) return text;
  if (secret === 'value') return REDACTED;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return REDACTED; // not a URL: nothing tells where a password would be
  }
  if (url.password !== '') url.password = REDACTED;
  if (url.searchParams.has('password')) url.searchParams.set('password', REDACTED);
  return url.toString().replaceAll(encodeURIComponent(REDACTED), REDACTED);
}

function shown(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (Array.isArray(value)) return value.join(',');
  return String(value);
}

function effective(declared: Setting, reading: SettingReading | undefined, env: Environment, invalid: boolean): EffectiveSetting {
  const base = { name: declared.name, tier: declared.tier, invalid, ...(declared.unit === undefined ? {} : { unit: declared.unit }) };
  if (reading === undefined) {
    const raw = env[declared.name];
    const set = raw !== undefined && raw.trim() !== '';
    const value = set ? redact(raw, declared.secret) : shown(declared.fallback);
    return { ...base, value, source: set ? 'environment' : 'default', used: false };
  }
  // A refused value shows as given (it has no parsed form); a secret never shows.
  const fromEnvironment =
    reading.raw !== undefined && (reading.problem !== undefined || declared.secret !== undefined)
      ? redact(reading.raw, declared.secret)
      : undefined;
  return {
    ...base,
    value: fromEnvironment ?? shown(reading.value),
    source: reading.source,
    ...(reading.from === undefined ? {} : { from: reading.from }),
    used: true,
    ...(reading.problem === undefined ? {} : { problem: reading.problem }),
  };
}

/**
 * Reads `env` as every runtime does (the host's loaders, which include the shared and the
 * pipelines' settings, and the CLI's and the Lambda functions' own), keeping every problem,
 * and lists every declared variable with its effective value and source.
 */
export function effectiveSettings(env: Environment): EffectiveSettings {
  const reader = new SettingsReader(env);
  readHostSettings(reader);
  for (const declared of [
    STORAGE_MIGRATIONS_DIR,
    STORAGE_DB_SECRET_ID,
    STORAGE_ACTOR,
    POWERTOOLS_LOG_LEVEL,
    POWERTOOLS_METRICS_NAMESPACE,
  ]) {
    reader.read(declared);
  }
  const readings = new Map(reader.readings().map((reading) => [reading.setting.name, reading]));
  return {
    settings: catalogVariables().map((declared) => effective(declared, readings.get(declared.name), env, reader.invalid(declared.name))),
    problems: reader.problems(),
  };
}
