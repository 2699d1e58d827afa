/**
 * The consumer settings the host and the CLI share: the shared settings plus every pipeline's
 * Kafka side (topic, group, batch size) and the host's selection of pipelines.
 */
import { deepFreeze } from '../shared/env.js';
import type { Environment } from '../shared/env.js';
import { isPipelineName, PIPELINE_NAMES } from '../shared/pipelines.js';
import type { PipelineName } from '../shared/pipelines.js';
import { loadWith } from '../shared/setting.js';
import type { SettingsReader } from '../shared/setting.js';
import { readSettings } from '../shared/settings.js';
import type { Settings } from '../shared/settings.js';
import {
  STORAGE_GROUP,
  STORAGE_MAX_POLL_RECORDS,
  PIPELINE_MAX_POLL_RECORDS,
  STORAGE_PIPELINES,
  STORAGE_TOPIC,
} from './setting-declarations.js';

/** One pipeline's Kafka side: the host's and the CLI's (on Lambda, its event source mapping's). */
export interface PipelineSettings {
  readonly name: PipelineName;
  readonly topic: string;
  readonly group: string;
  /** Records per batch: what the host cuts batches to (Lambda: the mapping's BatchSize). */
  readonly batchSize: number;
}

/** The shared settings plus every pipeline's Kafka side and the host's selection: what the host and the CLI run with. */
export interface ConsumerSettings extends Settings {
  readonly pipelines: Readonly<Record<PipelineName, PipelineSettings>>;
  /** Pipelines a host process runs (`STORAGE_PIPELINES`); all of them by default. */
  readonly selectedPipelines: readonly PipelineName[];
}

function readPipeline(reader: SettingsReader, name: PipelineName, generalBatch: number | undefined): PipelineSettings {
  const batchSize = PIPELINE_MAX_POLL_RECORDS.of(name);
  return {
    name,
    topic: reader.read(STORAGE_TOPIC.of(name)),
    group: reader.read(STORAGE_GROUP.of(name)),
    batchSize: generalBatch === undefined ? reader.read(batchSize) : reader.read(batchSize, generalBatch, STORAGE_MAX_POLL_RECORDS.name),
  };
}

function readSelectedPipelines(reader: SettingsReader): PipelineName[] {
  const names = reader.read(STORAGE_PIPELINES);
  const unknown = names.filter((name) => !isPipelineName(name));
  if (unknown.length > 0) {
    reader.refuse(
      [STORAGE_PIPELINES.name],
      `STORAGE_PIPELINES names unknown pipeline(s) ${unknown.join(', ')}; known: ${PIPELINE_NAMES.join(', ')}`,
    );
  } else if (names.length === 0) {
    reader.refuse([STORAGE_PIPELINES.name], 'STORAGE_PIPELINES selects no pipeline');
  }
  const known = [...new Set(names.filter(isPipelineName))];
  return known.length > 0 ? known : [...PIPELINE_NAMES];
}

/** Reads the shared settings and the pipelines' through `reader`; unfrozen, for loaders that compose it. */
export function readConsumerSettings(reader: SettingsReader): ConsumerSettings {
  const storage = readSettings(reader);
  // Read even when every pipeline has its own: a bad value is refused all the same.
  const generalBatch = reader.read(STORAGE_MAX_POLL_RECORDS);
  const pipelines = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, readPipeline(reader, name, generalBatch)])) as Record<
    PipelineName,
    PipelineSettings
  >;
  return { ...storage, pipelines, selectedPipelines: readSelectedPipelines(reader) };
}

/**
 * Reads and validates what the host and the CLI run with: the shared settings plus the
 * pipelines' topics, groups, batch sizes and selection. One ConfigurationError names every
 * invalid variable. Frozen.
 */
export function loadConsumerSettings(env: Environment = process.env): ConsumerSettings {
  return deepFreeze(loadWith(env, readConsumerSettings));
}
