import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // In the checkout the package's own entries are its sources (as tsconfig.json's paths say);
  // the installed package's compiled entries are tested from a packed tarball (test/e2e/package.test.ts).
  resolve: {
    alias: {
      'captcha-fleet/producer': fileURLToPath(new URL('./clients/index.ts', import.meta.url)),
      'captcha-fleet/cdk': fileURLToPath(new URL('./lib/index.ts', import.meta.url)),
    },
  },
  test: {
    include: ['test/**/*.test.ts'],
    // Every test's temporary files under one directory of the run, removed at its end.
    globalSetup: ['test/helpers/temp-root.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: emulator-heavy files fight for CPU when run many at once.
    maxWorkers: 2,
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', POWERTOOLS_DEV: 'false' },
  },
});
