/**
 * The chaos run's workload: a seeded, mixed stream of messages over every pipeline's topic, each with
 * the outcome it must have (see message-generator.ts), in production order.
 */
import type { PipelineName } from '../shared/pipelines.js';
import type { RejectionReason } from '../shared/records.js';
import { MessageGenerator } from './message-generator.js';
import type { Workload } from './plan.js';
import { CHAOS_PIPELINES } from './plan.js';
import { createRandom } from './random.js';
import { chaosApps } from './values.js';

const POISON_REASONS: readonly RejectionReason[] = [
  'invalid_encoding',
  'invalid_json',
  'invalid_message',
  'invalid_message',
  'empty_message',
  'unknown_application',
  'rejected_by_database',
];

/**
 * Generates `total` messages for `seed`: about 70% reviews (each synced 1-5 times), 25%
 * app-stats, 5% network-metrics, about 1% poison of every reason on every topic.
 */
export function generateWorkload(seed: number, total: number): Workload {
  const random = createRandom(seed);
  const apps = chaosApps();
  const generator = new MessageGenerator(random.fork('messages'), apps, `s${seed}`);
  const topics = CHAOS_PIPELINES;
  const poisonCount = Math.max(POISON_REASONS.length * topics.length, Math.round(total * 0.01));
  const poisonRandom = random.fork('poison');
  for (let i = 0; i < poisonCount && generator.drafts.length < total; i++) {
    // The first rounds give every reason on every topic; the rest are drawn at random.
    const round = i < POISON_REASONS.length * topics.length;
    const reason = round ? (POISON_REASONS[i % POISON_REASONS.length] as RejectionReason) : poisonRandom.pick(POISON_REASONS);
    const topic = round ? (topics[Math.floor(i / POISON_REASONS.length)] as PipelineName) : poisonRandom.pick(topics);
    generator.poison(poisonRandom.next(), topic, reason);
  }
  const shape = random.fork('shape');
  while (generator.drafts.length < total) {
    const left = total - generator.drafts.length;
    const roll = shape.next();
    if (roll < 0.25) generator.appStats(shape.next());
    else if (roll < 0.3) generator.networkMetrics(shape.next());
    else {
      const versions = Math.min(left, shape.pick([1, 1, 1, 2, 2, 2, 3, 3, 4, 5]));
      generator.review(Array.from({ length: versions }, () => shape.next()));
    }
  }
  const drafts = generator.drafts.slice(0, total).sort((a, b) => a.time - b.time);
  const messages = drafts.map((draft, id) => ({
    id,
    topic: draft.topic,
    key: draft.key,
    value: draft.value,
    expect: draft.expect,
    label: draft.label,
  }));
  return { seed, apps, messages };
}
