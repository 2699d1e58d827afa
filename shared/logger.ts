/** A logger shape the core needs; Powertools' Logger and console-like loggers both fit. */
export interface CoreLogger {
  debug(message: string, ...extra: Array<Record<string, unknown>>): void;
  info(message: string, ...extra: Array<Record<string, unknown>>): void;
  warn(message: string, ...extra: Array<Record<string, unknown>>): void;
  error(message: string, ...extra: Array<Record<string, unknown>>): void;
}
