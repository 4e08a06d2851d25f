/**
 * The Lambda handlers' code: one esbuild bundle per handler (`functions/<name>/handler.ts` →
 * `index.mjs` and its source map), built one way wherever it is built.
 *
 * - In a checkout, `cdk synth` builds it from the TypeScript source (local bundling, no Docker),
 *   so a changed handler is always what deploys.
 * - The published package ships the same bundles prebuilt (`npm run build` writes them to
 *   `dist/lambda/<name>/`), and the construct takes them from there: a user's `cdk synth` needs
 *   neither esbuild nor Docker nor the handlers' own dependencies, and what it deploys is byte for
 *   byte what this project's tests ran, whatever versions the user's install resolved.
 *
 * The bundle is computed for a fixed virtual location (see {@link bundleOptions}), so its bytes —
 * and so the asset hash in the template — do not depend on where it is written: the checkout's
 * synth and the package's give the same template.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AssetHashType, DockerImage } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { BuildOptions } from 'esbuild';

/** The bundle's module file. */
export const BUNDLE_FILE = 'index.mjs';
/** The Lambda handler setting for a bundle: its module's `handler` export. */
export const BUNDLE_HANDLER = 'index.handler';

/** The package's prebuilt bundles: `dist/lambda/` beside the compiled `dist/lib/` (absent in a checkout). */
const PREBUILT_DIR = fileURLToPath(new URL('../lambda/', import.meta.url));
/** The checkout's root (the parent of `lib/`), where `functions/<name>/handler.ts` live. */
const SOURCE_ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * esbuild's ESM output has no `require`; some dependencies still call it (the AWS SDK's
 * CommonJS paths), so the bundle defines one.
 */
const ESM_REQUIRE_BANNER =
  "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);";

/** A handler's name from its entry path (`functions/consumer/handler.ts` → `consumer`). */
export function handlerNameOf(entry: string): string {
  const match = /^functions\/([a-z][a-z0-9-]*)\/handler\.ts$/.exec(entry);
  if (match?.[1] === undefined)
    throw new Error(`a fleet function's entry is functions/<name>/handler.ts, not ${entry}`);
  return match[1];
}

/**
 * The esbuild options of one handler's bundle: ESM for Node.js 24, minified, an external source
 * map without sources, the AWS SDK left to the runtime. The output file is a virtual path two
 * levels under the root (as `cdk.out/asset.<hash>/` is): the source map's relative paths are
 * computed from it, so they are the same wherever the files are written.
 */
export function bundleOptions(name: string, root = SOURCE_ROOT): BuildOptions & { write: false } {
  return {
    entryPoints: [join(root, 'functions', name, 'handler.ts')],
    outfile: join(root, 'cdk.out', name, BUNDLE_FILE),
    absWorkingDir: root,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    mainFields: ['module', 'main'],
    banner: { js: ESM_REQUIRE_BANNER },
    minify: true,
    sourcemap: true,
    sourcesContent: false,
    // The nodejs24.x runtime provides the AWS SDK v3.
    external: ['@aws-sdk/*'],
    logLevel: 'warning',
    write: false,
  };
}

/**
 * Build one handler's bundle into `outDir` (index.mjs, index.mjs.map). Needs esbuild, a
 * development dependency: only a checkout builds bundles.
 * @returns the files written
 */
export function writeHandlerBundle(name: string, outDir: string, root = SOURCE_ROOT): string[] {
  const esbuild = createRequire(import.meta.url)('esbuild') as typeof import('esbuild');
  const result = esbuild.buildSync(bundleOptions(name, root));
  mkdirSync(outDir, { recursive: true });
  return result.outputFiles.map((file) => {
    const target = join(outDir, basename(file.path));
    writeFileSync(target, file.contents);
    return target;
  });
}

/**
 * The code of one handler: the package's prebuilt bundle when there is one, else built from the
 * checkout's source at synth.
 * @throws Error when neither the bundle nor its source is there (a broken install).
 */
export function handlerCode(name: string): lambda.Code {
  const prebuilt = join(PREBUILT_DIR, name);
  if (existsSync(join(prebuilt, BUNDLE_FILE))) return lambda.Code.fromAsset(prebuilt);
  const source = join(SOURCE_ROOT, 'functions', name);
  if (!existsSync(join(source, 'handler.ts')))
    throw new Error(
      `captcha-fleet: the ${name} handler has no bundle (${prebuilt}) and no source to build one from (${source}); reinstall captcha-fleet`,
    );
  return lambda.Code.fromAsset(source, {
    // The hash of the bundle itself (as NodejsFunction does): the same source gives the same asset.
    assetHashType: AssetHashType.OUTPUT,
    bundling: {
      // Never pulled: local bundling always succeeds or throws.
      image: DockerImage.fromRegistry('dummy'),
      local: {
        tryBundle(outputDir: string): boolean {
          writeHandlerBundle(name, outputDir);
          return true;
        },
      },
    },
  });
}
