// Runs in every integration test worker before its test file: kafkajs clients created anywhere in
// a test (directly, or through the host and the CLI) print no TimeoutNegativeWarning.
import { dropKafkajsTimeoutWarnings } from '../../host/kafkajs-warnings.js';

dropKafkajsTimeoutWarnings();
