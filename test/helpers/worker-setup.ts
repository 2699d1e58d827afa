// Runs in every integration test worker before its test file: kafkajs clients created anywhere in
// a test (directly, or through the host and the CLI) have the kafkajs workarounds (codecs, wire
// headers) and print no TimeoutNegativeWarning.
import { installKafkajsWorkarounds } from '../../kafka/kafkajs/index.js';

installKafkajsWorkarounds();
