// Transitional re-export while host/ moves land; removed in the same change set.
export { envSuffix } from './pipeline-spec.js';
export { isPipelineName, PIPELINE_NAMES } from './pipelines.js';
export type { PipelineName } from './pipelines.js';
export { PIPELINES as PIPELINE_DEFAULTS } from './pipelines.js';
