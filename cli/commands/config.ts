/**
 * `storage-consumer config`: an environment's effective settings as cli/effective-settings.ts reads
 * them, with every invalid one named (docs/operations.md, "The effective settings").
 */
import { defineCommand, EXIT, jsonOption } from '../command.js';
import { effectiveSettings } from '../effective-settings.js';
import type { EffectiveSetting } from '../effective-settings.js';
import { renderJson, renderTable } from '../output.js';

function sourceText(setting: EffectiveSetting): string {
  const source = setting.from === undefined ? setting.source : `${setting.source} (from ${setting.from})`;
  if (setting.invalid) return `${source}: INVALID`;
  return setting.used ? source : `${source} (not read with these settings)`;
}

/** `config`: the effective settings of this environment. */
export const config = defineCommand({
  name: 'config',
  summary: 'print the effective settings (value and source), naming every invalid one',
  description: `Prints every setting of docs/settings.md as this environment makes it: its effective value and
its source (environment, or default; "from X" when a default comes from another setting, e.g. a
pipeline's batch size from STORAGE_MAX_POLL_RECORDS), the common ones first. Secrets are
redacted: the password of DATABASE_URL, KAFKA_SASL_PASSWORD, STORAGE_HTTP_CONTROL_TOKEN. "not
read with these settings" marks one no loader reads here (STORAGE_LAMBDA_REGION in-process). It
validates them all as the host's start, the CLI and the Lambda functions do, and exits 2 naming
every invalid setting and every broken rule between settings (on stderr; the listing is printed
all the same). Needs neither Kafka nor the database.`,
  options: jsonOption('{settings: [{name, tier, invalid, value, unit?, source, from?, used, problem?}], problems: [...]}'),
  async run({ values }, io) {
    const { settings, problems } = effectiveSettings(io.env);
    if (values.json === true) {
      io.stdout(renderJson({ settings, problems }));
    } else {
      io.stdout(
        renderTable(
          [
            { header: 'SETTING', value: (row: EffectiveSetting) => row.name },
            { header: 'TIER', value: (row) => row.tier },
            { header: 'VALUE', value: (row) => row.value },
            { header: 'UNIT', value: (row) => row.unit },
            { header: 'SOURCE', value: sourceText },
          ],
          settings,
        ),
      );
    }
    if (problems.length === 0) return EXIT.ok;
    io.stderr(
      `storage-consumer config: ${problems.length} invalid setting${problems.length === 1 ? '' : 's'}:\n` +
        problems.map((problem) => `  ${problem}\n`).join(''),
    );
    // 2, as a usage error: what is wrong is the input (the environment), not a check against a service.
    return EXIT.usage;
  },
});
