/**
 * The sample events in `events/`: generated, never hand-edited, and valid Lambda Kafka events.
 */
import { readdir, readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { EVENTS_DIRECTORY, eventFileText, sampleEvents } from '../../scripts/generate-events.js';
import { parseKafkaEvent } from '../../shared/kafka-event.js';

const samples = sampleEvents();

describe('events/', () => {
  it('holds exactly what `npm run events` generates', async () => {
    const files = (await readdir(EVENTS_DIRECTORY)).filter((file) => file.endsWith('.json')).sort();
    expect(files).toEqual(Object.keys(samples).map((name) => `${name}.json`).sort());
    for (const [name, event] of Object.entries(samples)) {
      expect(await readFile(`${EVENTS_DIRECTORY}${name}.json`, 'utf8'), `${name}.json is stale: run npm run events`).toBe(eventFileText(event));
    }
  });

  it.each(Object.keys(samples))('%s is a Lambda Kafka event of one topic, with signed header bytes', (name) => {
    const records = parseKafkaEvent(samples[name]);
    const topics = new Set(records.map((record) => record.topic));
    expect(topics.size).toBe(1);
    expect(name.startsWith([...topics][0]!)).toBe(true);
    const headerBytes = Object.values(samples[name]!.records)
      .flat()
      .flatMap((record) => record.headers ?? [])
      .flatMap((header) => Object.values(header).flat());
    expect(headerBytes.every((byte) => byte >= -128 && byte <= 127)).toBe(true);
  });

  it('covers every case for every topic, and a stale review update', () => {
    for (const topic of ['app-stats', 'reviews', 'network-metrics']) {
      for (const suffix of ['', '-poison', '-unknown-app', '-legacy', '-duplicates']) {
        expect(samples).toHaveProperty(`${topic}${suffix}`);
      }
    }
    expect(samples).toHaveProperty('reviews-stale-update');
  });
});
