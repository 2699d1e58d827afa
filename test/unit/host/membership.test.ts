import { describe, expect, it } from 'vitest';
import type { MembershipChange } from '../../../host/membership.js';
import { Membership, revokeCauseOf } from '../../../host/membership.js';

describe('the membership life cycle', () => {
  it('goes starting -> joining -> assigned -> revoking -> joining -> assigned -> leaving -> stopped, one generation per assignment', () => {
    // Prepare
    const membership = new Membership();
    const changes: MembershipChange[] = [];
    membership.onChange((change) => changes.push(change));

    // Act
    membership.joining();
    membership.assigned([2, 0]);
    const ownedInFirst = [membership.owns(0, 1), membership.owns(2), membership.owns(1)];
    membership.revoke('rebalance');
    const ownedWhileRevoking = membership.owns(0);
    membership.joining();
    membership.assigned([1]);
    const ownedAfter = [membership.owns(0), membership.owns(1, 1), membership.owns(1, 2)];
    membership.leaving();
    const ownedWhileLeaving = membership.owns(1);
    membership.stopped();

    // Assess
    expect(changes.map(({ from, to }) => `${from}->${to}`)).toEqual([
      'starting->joining',
      'joining->assigned',
      'assigned->revoking',
      'revoking->joining',
      'joining->assigned',
      'assigned->leaving',
      'leaving->stopped',
    ]);
    expect(ownedInFirst).toEqual([true, true, false]);
    expect(ownedWhileRevoking).toBe(false);
    expect(ownedAfter).toEqual([false, false, true]);
    expect(ownedWhileLeaving).toBe(false);
    expect(membership.snapshot()).toMatchObject({ state: 'stopped', generation: 2, joins: 2, lastRevoke: 'rebalance' });
  });

  it('a join from assigned revokes first; a stop aborts the signal at once and no later event undoes it', () => {
    // Prepare
    const membership = new Membership();
    const causes: Array<string | undefined> = [];
    membership.onChange(({ to, cause }) => to === 'revoking' && causes.push(cause));
    membership.joining();
    membership.assigned([0]);

    // Act
    membership.joining();
    membership.leaving();
    membership.assigned([0]);
    membership.joining();

    // Assess
    expect(causes).toEqual(['rebalance']);
    expect(membership.stopSignal.aborted).toBe(true);
    expect(membership.state).toBe('leaving');
    expect(membership.owns(0)).toBe(false);
  });

  it('tells a rebalance and a dropped member from other errors, through causes, whatever the client class', () => {
    const typed = (type: string) => Object.assign(new Error(type), { type });
    expect(revokeCauseOf(typed('REBALANCE_IN_PROGRESS'))).toBe('rebalance');
    expect(revokeCauseOf(typed('UNKNOWN_MEMBER_ID'))).toBe('dropped');
    expect(revokeCauseOf(new Error('retry', { cause: typed('ILLEGAL_GENERATION') }))).toBe('dropped');
    expect(revokeCauseOf(new Error('Connection error: read ECONNRESET'))).toBeUndefined();
    expect(revokeCauseOf('REBALANCE_IN_PROGRESS')).toBeUndefined();
  });
});
