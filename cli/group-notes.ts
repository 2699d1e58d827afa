/**
 * What `lag`, `status` and `verify` say beside a group's figures, so that a figure that looks
 * like a throughput problem names its real cause: the pipeline is paused, or its consumers are
 * in another group than the one the command looked at (another stage's names, a
 * `STORAGE_GROUP_<PIPELINE>` set on the host but not here).
 */
import type { KafkaAdmin } from '../kafka/port.js';
import type { GroupMember } from '../kafka/lag.js';
import type { PipelinePause } from '../shared/pause-store.js';

/** Another consumer group with members reading the same topic. */
export interface OtherGroup {
  readonly group: string;
  readonly members: number;
}

/** At most this many groups are described in one request. */
const DESCRIBE_CHUNK = 50;

/**
 * The consumer groups other than `group` whose members have partitions of `topic` assigned
 * (asked for only when `group` has no members: one group list and one description per 50 groups).
 */
export async function otherGroupsOnTopic(admin: KafkaAdmin, topic: string, group: string): Promise<OtherGroup[]> {
  const groups = await admin.listGroups();
  const candidates = groups
    .filter((listed) => listed.groupId !== group && listed.protocolType === 'consumer')
    .map((listed) => listed.groupId);
  const found: OtherGroup[] = [];
  for (let index = 0; index < candidates.length; index += DESCRIBE_CHUNK) {
    const described = await admin.describeGroups(candidates.slice(index, index + DESCRIBE_CHUNK));
    for (const candidate of described) {
      const members = candidate.members.filter((member) => (member.assignment[topic]?.length ?? 0) > 0).length;
      if (members > 0) found.push({ group: candidate.groupId, members });
    }
  }
  return found.sort((a, b) => a.group.localeCompare(b.group));
}

/** `group storage-consumer.reviews has 1 member(s) on reviews`: the groups that do read the topic, in words. */
export function otherGroupsText(topic: string, others: readonly OtherGroup[]): string {
  return others.map((other) => `group ${other.group} has ${other.members} member(s) on ${topic}`).join(', ');
}

/** A paused pipeline in one phrase: `PAUSED by ops@host-1 at 2026-...: schema change`. */
export function pausedText(pause: PipelinePause): string {
  return `PAUSED by ${pause.by} at ${pause.at.toISOString()}${pause.reason ? `: ${pause.reason}` : ''}`;
}

/** A member in one phrase, partitions included: `storage-consumer-host-1-4242@/10.0.0.5 (partitions 0, 2)`. */
export function memberText(member: GroupMember): string {
  const partitions = member.partitions.length === 0 ? 'no partitions' : `partitions ${member.partitions.join(', ')}`;
  return `${member.clientId}@${member.clientHost} (${partitions})`;
}
