// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The Kafka port (kafka/port.ts): only kafka/ knows a Kafka client, types included. The host, the
 * CLI, the core, the invokers and the settings reach Kafka through the port and kafka/clients.ts.
 */
const kafkaClientPatterns = [
  {
    group: ['kafkajs', 'kafkajs/*', '@platformatic/kafka', '@platformatic/kafka/*'],
    message: 'only kafka/ imports a Kafka client: use the port (kafka/port.ts) and kafka/clients.ts',
  },
  {
    group: ['**/kafka/kafkajs/**', '**/kafka/platformatic/**'],
    message: "a client's implementation is kafka/'s own: use the port (kafka/port.ts) and kafka/clients.ts",
  },
];

export default tseslint.config(
  { ignores: ['node_modules/', '.esbuild/', '.serverless/', '.cache/', '.data/', 'coverage/', 'dist/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['shared/**/*.ts', 'handlers/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'error' },
  },
  {
    // The CLI stands beside the host, not on it (docs/design.md, "The Kafka seam"). `run` alone
    // hands the process to the host's entry point, by a dynamic import this rule does not see.
    files: ['cli/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...kafkaClientPatterns,
            {
              group: ['**/host/**'],
              message:
                'the CLI imports nothing from host/: the settings are in config/, what the host shows outward (heartbeat files, ' +
                'HTTP paths, status document) in host-api/, the Kafka plumbing in kafka/ (docs/design.md, "The Kafka seam")',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['{host,shared,invoke,config}/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: kafkaClientPatterns }] },
  },
  {
    // Product code: Prettier wraps code at 140 columns but leaves long strings and comments whole.
    files: ['{shared,config,host,host-api,kafka,invoke,cli,aws,deploy,handlers,bin,scripts,dev}/**/*.{ts,js}'],
    rules: { 'max-len': ['error', { code: 140, ignoreUrls: true }] },
  },
);
