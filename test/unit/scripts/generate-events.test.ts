/**
 * The sample events in `events/`: generated, never hand-edited, and valid Lambda Kafka events.
 */
import { readdir, readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { EVENTS_DIRECTORY, SAMPLE_APPLICATIONS, eventFileText, sampleEvents } from '../../../scripts/generate-events.js';
import { parseKafkaEvent } from '../../../shared/kafka-event.js';
import { PIPELINE_NAMES } from '../../../shared/pipelines.js';

const samples = sampleEvents();

describe('events/', () => {
  it('holds exactly what `npm run events` generates', async () => {
    const files = (await readdir(EVENTS_DIRECTORY)).filter((file) => file.endsWith('.json')).sort();
    expect(files).toEqual(
      Object.keys(samples)
        .map((name) => `${name}.json`)
        .sort(),
    );
    for (const [name, event] of Object.entries(samples)) {
      expect(await readFile(`${EVENTS_DIRECTORY}${name}.json`, 'utf8'), `${name}.json is stale: run npm run events`).toBe(
        eventFileText(event),
      );
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

  it('covers every topic, every case of a topic with hand-written cases, and a stale review update', () => {
    for (const topic of PIPELINE_NAMES) {
      expect(samples).toHaveProperty(topic);
      if (!Object.keys(samples).some((name) => name.startsWith(`${topic}-`))) continue;
      for (const suffix of ['-poison', '-unknown-app', '-legacy', '-duplicates']) {
        expect(samples).toHaveProperty(`${topic}${suffix}`);
      }
    }
    expect(samples).toHaveProperty('reviews-stale-update');
  });

  it("refers only to apps npm start registers (dev/sample-apps.sql), but for the unknown-app case's", async () => {
    const sql = await readFile(new URL('../../../dev/sample-apps.sql', import.meta.url), 'utf8');
    const registered = new Set([...sql.matchAll(/\(\s*\d+\s*,\s*'([^']+)'/g)].map(([, name]) => name));
    const named = (name: string) =>
      parseKafkaEvent(samples[name]).flatMap((record) => {
        try {
          const message = JSON.parse((record.value ?? Buffer.alloc(0)).toString('utf8')) as { package_name?: unknown };
          return typeof message.package_name === 'string' ? [message.package_name] : [];
        } catch {
          return [];
        }
      });

    for (const app of SAMPLE_APPLICATIONS) expect(registered).toContain(app.package_name);
    for (const name of Object.keys(samples)) {
      const unregistered = named(name).filter((app) => !registered.has(app));
      if (name.endsWith('-unknown-app')) expect(unregistered, name).toEqual(['com.example.unregistered']);
      else expect(unregistered, name).toEqual([]);
    }
  });
});
