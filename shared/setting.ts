/**
 * Settings declared once and read through their declarations: a `Setting` holds its variable,
 * schema, default, unit, runtimes, tier and one line for the reference (per pipeline: a
 * `SettingFamily`; a rule between settings: a `CrossConstraint`); `SettingsReader` reads them from
 * one environment and names every problem at once. docs/settings.md is generated from the
 * declarations (`npm run settings:doc`) and `storage-consumer config` prints them.
 */
import type { z } from 'zod';
import type { Environment } from './env.js';
import { ConfigurationError } from './errors.js';

/** Who reads a setting: the Lambda functions, the host process, the operations CLI. */
export const RUNTIMES = ['lambda', 'host', 'cli'] as const;
export type Runtime = (typeof RUNTIMES)[number];

/** `common`: the settings a new user sets; `advanced`: the rest. */
export const TIERS = ['common', 'advanced'] as const;
export type Tier = (typeof TIERS)[number];

/** The areas the reference groups settings by, in its order. */
export const AREAS = {
  database: 'Database, retries and logs',
  pipelines: 'Pipelines',
  kafka: 'Kafka connection (host and CLI)',
  host: 'The host: batches, timers and progress rules',
  http: "The host's HTTP endpoint",
  invoke: 'The host in Lambda invoke mode',
  operations: 'Operations and deployment',
} as const;
export type Area = keyof typeof AREAS;

/** Units stated in the reference (a name ending in `_MS`, `_S` or `_BYTES` states its own too). */
export type Unit = 'ms' | 's' | 'bytes' | 'records' | 'connections' | 'retries' | 'lines';

/** How `storage-consumer config` shows a secret: hidden whole, or a URL with its password hidden. */
export type Secret = 'value' | 'url-password';

/** One declared setting. */
export interface Setting<T = unknown> {
  /** The environment variable: an interface, never renamed. */
  readonly name: string;
  readonly schema: z.ZodType<T>;
  /** The value when the variable is unset or blank (`undefined`: absent). */
  readonly fallback: T;
  /** How the reference states the default when the value alone does not say it (a derived default). */
  readonly defaultText?: string;
  readonly unit?: Unit;
  readonly runtimes: readonly Runtime[];
  readonly tier: Tier;
  readonly area: Area;
  /** One line for the reference. */
  readonly description: string;
  /** When the setting must be set (`always`, or the condition); absent: optional. */
  readonly required?: string;
  readonly secret?: Secret;
  /** Names in `STORAGE_<X>_<PIPELINE>` form: the family this one belongs to. */
  readonly family?: string;
}

/** Declares one setting (the identity function, typed: `T` comes from the schema). */
export function setting<T>(declaration: Setting<T>): Setting<T> {
  return declaration;
}

/** A setting per pipeline, `<NAME>_<PIPELINE>`: declared once, one variable per pipeline. */
export interface SettingFamily<T, P extends string = string> {
  /** The family's name with `<PIPELINE>` in it, as the reference lists it. */
  readonly name: string;
  readonly tier: Tier;
  readonly area: Area;
  readonly runtimes: readonly Runtime[];
  readonly description: string;
  readonly defaultText: string;
  readonly unit?: Unit;
  readonly required?: string;
  /** The member for one pipeline. */
  of(pipeline: P): Setting<T>;
}

/** Declares a family from its prefix (`STORAGE_TOPIC`), the pipelines' suffixes and each member's default. */
export function settingFamily<T, P extends string>(options: {
  readonly prefix: string;
  readonly suffix: (pipeline: P) => string;
  readonly schema: z.ZodType<T>;
  readonly fallback: (pipeline: P) => T;
  readonly defaultText: string;
  readonly unit?: Unit;
  readonly runtimes: readonly Runtime[];
  readonly tier: Tier;
  readonly area: Area;
  readonly description: string;
  readonly required?: string;
}): SettingFamily<T, P> {
  const name = `${options.prefix}_<PIPELINE>`;
  const { prefix, suffix, fallback, ...shared } = options;
  return {
    ...shared,
    name,
    of: (pipeline) => ({ ...shared, name: `${prefix}_${suffix(pipeline)}`, fallback: fallback(pipeline), family: name }),
  };
}

/**
 * A rule between settings, declared beside them: the reference states `rule` under each of
 * `settings`, and the loaders apply `check` once every one of them was read without a problem.
 */
export interface CrossConstraint {
  readonly settings: readonly Setting<unknown>[];
  /** One line for the reference. */
  readonly rule: string;
  /** The problem, naming the variables, or `undefined` when the rule holds. `value` gives a read setting's value. */
  readonly check: (value: <T>(setting: Setting<T>) => T) => string | undefined;
}

/** Where an effective value came from. */
export type SettingSource = 'environment' | 'default';

/** One setting as a loader read it. */
export interface SettingReading {
  readonly setting: Setting<unknown>;
  readonly source: SettingSource;
  /** The variable's text when set. */
  readonly raw: string | undefined;
  readonly value: unknown;
  /** A default taken from other settings: which (e.g. `STORAGE_MAX_POLL_RECORDS` for a pipeline's batch size). */
  readonly from?: string;
  /** The problem with it, when it was refused. */
  readonly problem?: string;
}

/**
 * Reads settings from one environment and keeps every problem instead of stopping at the
 * first: a start-up that fails names every invalid setting at once (`done()`).
 */
export class SettingsReader {
  readonly #readings = new Map<string, SettingReading>();
  readonly #problems: string[] = [];
  /** Settings refused for their own value (or their absence). */
  readonly #failed = new Set<string>();
  /** Settings of a broken rule, each valid on its own. */
  readonly #inBrokenRule = new Set<string>();

  constructor(readonly env: Environment) {}

  /**
   * The setting's value, or `fallback` (its declared default unless given; `from` names the
   * settings a derived one comes from) when unset or blank. A bad value is kept as a problem.
   */
  read<T>(declared: Setting<T>, fallback: T = declared.fallback, from?: string): T {
    const known = this.#readings.get(declared.name);
    if (known !== undefined) return known.value as T;
    const raw = this.env[declared.name];
    if (raw === undefined || raw.trim() === '') {
      const reading: SettingReading = { setting: declared as Setting<unknown>, source: 'default', raw: undefined, value: fallback };
      this.#readings.set(declared.name, from === undefined || fallback === undefined ? reading : { ...reading, from });
      return fallback;
    }
    const parsed = declared.schema.safeParse(raw);
    if (parsed.success) {
      this.#readings.set(declared.name, { setting: declared as Setting<unknown>, source: 'environment', raw, value: parsed.data });
      return parsed.data;
    }
    const reason = parsed.error.issues.map((issue) => issue.message).join('; ');
    // A secret's value is never echoed: the message lands in logs.
    const problem =
      declared.secret === undefined
        ? `${declared.name}=${JSON.stringify(raw)} is invalid: ${reason}`
        : `${declared.name} is invalid: ${reason}`;
    this.#readings.set(declared.name, { setting: declared as Setting<unknown>, source: 'environment', raw, value: fallback, problem });
    this.#fail([declared.name], problem);
    return fallback;
  }

  /** Like `read`, for a setting that must be set here (`why`: the condition, for the message). */
  require<T>(declared: Setting<T>, why = ''): T {
    const raw = this.env[declared.name];
    if (raw === undefined || raw.trim() === '') {
      const problem = `${declared.name} is required${why === '' ? ' but not set' : ` ${why}`}`;
      this.#readings.set(declared.name, {
        setting: declared as Setting<unknown>,
        source: 'default',
        raw: undefined,
        value: undefined,
        problem,
      });
      this.#fail([declared.name], problem);
      return undefined as T;
    }
    return this.read(declared);
  }

  /** Keeps a problem found by a loader itself (a rule between settings, a file that cannot be read). */
  refuse(names: readonly string[], problem: string): void {
    this.#fail(names, problem);
  }

  /** Applies a cross-constraint unless one of its settings was already refused (its value is then only the default). */
  check(constraint: CrossConstraint): void {
    if (constraint.settings.some((declared) => this.#failed.has(declared.name))) return;
    const problem = constraint.check((declared) => this.read(declared));
    if (problem === undefined) return;
    for (const declared of constraint.settings) this.#inBrokenRule.add(declared.name);
    this.#problems.push(problem);
  }

  /** Whether any of these settings was refused for its own value. */
  refused(...names: string[]): boolean {
    return names.some((name) => this.#failed.has(name));
  }

  /** Whether this setting was refused, for its own value or by a rule it takes part in. */
  invalid(name: string): boolean {
    return this.#failed.has(name) || this.#inBrokenRule.has(name);
  }

  /** Every setting read so far, in the order read. */
  readings(): SettingReading[] {
    return [...this.#readings.values()];
  }

  /** Every problem so far, in the order found. */
  problems(): string[] {
    return [...this.#problems];
  }

  /** Throws one ConfigurationError naming every problem, when there is any. */
  done(): void {
    if (this.#problems.length > 0) throw new ConfigurationError(configurationMessage(this.#problems), { problems: this.#problems });
  }

  #fail(names: readonly string[], problem: string): void {
    for (const name of names) this.#failed.add(name);
    this.#problems.push(problem);
  }
}

/** One problem as itself; several as their count and each in turn. */
function configurationMessage(problems: readonly string[]): string {
  return problems.length === 1 ? (problems[0] ?? '') : `${problems.length} invalid settings: ${problems.join('; ')}`;
}

/** One setting alone, e.g. a stray read outside the loaders: its value, or a ConfigurationError naming it. */
export function loadSetting<T>(env: Environment, declared: Setting<T>): T {
  return loadWith(env, (reader) => reader.read(declared));
}

/** Runs one loader over `env` with its own reader: the value, or a ConfigurationError naming every problem. */
export function loadWith<T>(env: Environment, read: (reader: SettingsReader) => T): T {
  const reader = new SettingsReader(env);
  const value = read(reader);
  reader.done();
  return value;
}
