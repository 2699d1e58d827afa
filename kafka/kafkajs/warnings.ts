/**
 * A Node warning kafkajs causes that nobody can act on (`TimeoutNegativeWarning`): how to recognise
 * it and a process-wide filter that drops it, installed by `installKafkajsWorkarounds`
 * (./index.ts); the host's process guards (host/process-guards.ts) use the same test.
 */

/**
 * kafkajs 2.2.4 arms a timer with a negative delay (requestQueue.scheduleCheckPendingRequests),
 * which Node 24 reports as a `TimeoutNegativeWarning` on stderr after a response; the timer still
 * fires as intended (Node clamps it to 1 ms), so the warning says nothing an operator can act on.
 */
export function isKafkajsTimeoutWarning(warning: Error): boolean {
  return warning.name === 'TimeoutNegativeWarning';
}

let installed = false;

/**
 * Drops kafkajs' {@link isKafkajsTimeoutWarning} warnings in this process; every other warning
 * still reaches the listeners that were there (Node's own printer by default). Idempotent; every
 * program that creates a kafkajs client calls it through `installKafkajsWorkarounds` (./index.ts;
 * the host's process guards filter the same way).
 */
export function dropKafkajsTimeoutWarnings(): void {
  if (installed) return;
  installed = true;
  const previous = process.listeners('warning');
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    if (isKafkajsTimeoutWarning(warning)) return;
    for (const listener of previous) listener.call(process, warning);
  });
}
