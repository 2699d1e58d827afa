/**
 * The fault schedule: which faults, at which point of the run. A point is a fraction of the
 * workload already produced (the harness paces production to consumption, so the hosts are
 * busy at every point); the schedule comes from the seed, so a failing run can be replayed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { HostFleet } from './hosts.js';
import type { Random } from './random.js';
import type { ChaosBroker, ChaosDatabase } from './servers.js';

/** The faults the harness injects. */
export const FAULT_KINDS = ['kill-host', 'restart-postgres', 'restart-broker', 'second-host-joins', 'second-host-leaves'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** One fault at one point of the run. */
export interface ScheduledFault {
  readonly kind: FaultKind;
  /** Fraction of the workload produced when it fires, in (0, 1). */
  readonly at: number;
  /** Milliseconds to wait after that point, so the fault lands while batches are in flight. */
  readonly delayMs: number;
}

/** How many faults of each kind. */
export interface FaultPlan {
  readonly kills: number;
  readonly postgresRestarts: number;
  readonly brokerRestarts: number;
  /** A second host process joins the groups and later leaves (two rebalances under load). */
  readonly secondHost: boolean;
}

/** Draws the moments of `plan`'s faults, sorted by `at`. */
export function scheduleFaults(plan: FaultPlan, random: Random): ScheduledFault[] {
  const faults: ScheduledFault[] = [];
  const at = (from: number, to: number) => from + random.next() * (to - from);
  const add = (kind: FaultKind, moment: number) => faults.push({ kind, at: moment, delayMs: random.int(50, 600) });
  for (let i = 0; i < plan.kills; i++) add('kill-host', at(0.02, 0.95));
  for (let i = 0; i < plan.postgresRestarts; i++) add('restart-postgres', at(0.15, 0.85));
  for (let i = 0; i < plan.brokerRestarts; i++) add('restart-broker', at(0.15, 0.85));
  if (plan.secondHost) {
    const join = at(0.1, 0.5);
    add('second-host-joins', join);
    add('second-host-leaves', at(join + 0.15, 0.9));
  }
  return faults.sort((a, b) => a.at - b.at);
}

/** What faults act on. */
export interface FaultTargets {
  readonly fleet: HostFleet;
  readonly database: ChaosDatabase;
  readonly broker: ChaosBroker;
  /** Picks which host a kill hits. */
  readonly targets: Random;
}

/** Injects one fault and says what happened. */
export async function injectFault(kind: FaultKind, { fleet, database, broker, targets }: FaultTargets): Promise<string> {
  switch (kind) {
    case 'kill-host': {
      // A host that stopped by itself is back within about a second.
      for (let i = 0; i < 100 && fleet.running().length === 0; i++) await sleep(100);
      const target = targets.pick(fleet.running().sort());
      const { killed, restarted } = await fleet.killAndRestart(target);
      return `SIGKILL host ${target}: pid ${killed.pid} ("${killed.commandLine}"); restarted as pid ${restarted.pid}`;
    }
    case 'restart-postgres': {
      const { downMs } = await database.crashAndRestart();
      return `PostgreSQL immediate shutdown (SIGQUIT to the postmaster) and restart with crash recovery; down ${(downMs / 1000).toFixed(1)} s`;
    }
    case 'restart-broker': {
      const { downMs } = await broker.crashAndRestart();
      return `Kafka broker JVM SIGKILLed and restarted on the same port and data folder; down ${(downMs / 1000).toFixed(1)} s`;
    }
    case 'second-host-joins': {
      const second = await fleet.start('b');
      return `host b joins the groups: pid ${second.pid}`;
    }
    case 'second-host-leaves': {
      for (let i = 0; i < 50 && !fleet.running().includes('b'); i++) await sleep(200);
      const exit = await fleet.stop('b');
      return `host b leaves the groups (SIGTERM), exit code ${String(exit.code)}`;
    }
  }
}
