import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/helpers/global-setup.ts'],
          setupFiles: ['test/helpers/worker-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // Files share one PostgreSQL server and one Kafka broker; two cores do not gain from more.
          maxWorkers: 2,
        },
      },
    ],
  },
});
