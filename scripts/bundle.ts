// `npm run build` (after tsc): the CLI and daemon as one minified ESM bundle with code splitting, dist/bundle/, which
// bin/blockspeaker.js runs when it is at least as new as tsc's dist/src. The daemon loads ~100 of our
// modules plus yaml's and pino's ~100 CommonJS files at start; as a few minified chunks it holds less source text
// and fewer module records, and starts with less loader work: about 3 MB of the idle daemon's RSS
// (BENCHMARKS.md "Footprint"). Splitting keeps the dynamic imports lazy (a subcommand, the linux or hns
// programmer, Calico's layout load only when used). Left outside: etcd3 (gRPC reads its .proto files beside its
// own sources), prom-client (loaded on the first scrape anyway), the native addons (koffi, fs-native-extensions:
// src/platform/file-lock.ts finds the latter's prebuild itself) and msgpackr's optional accelerator.
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
export const BUNDLE_DIR = 'dist/bundle';

// pino, loaded for what the daemon uses of it (a logger writing JSON lines to a file descriptor synchronously):
// its transports (worker threads, thread-stream) are left out, and it is told it runs on the main thread, which the
// daemon does. ~0.5 MB of the idle daemon (BENCHMARKS.md "Footprint"); pino.transport() says it is not built in.
const pinoWithoutTransports: esbuild.Plugin = {
  name: 'pino-without-transports',
  setup(build) {
    build.onLoad({ filter: /[\\/]pino[\\/]lib[\\/]transport\.js$/ }, () => ({
      loader: 'js',
      contents: "module.exports = function transport() { throw new Error('pino transports are not in the blockspeaker bundle: it logs JSON lines to stderr') }",
    }));
    build.onResolve({ filter: /^(node:)?worker_threads$/ }, (args) =>
      /[\\/]pino[\\/]lib[\\/]tools\.js$/.test(args.importer) ? { path: 'worker_threads', namespace: 'pino-main-thread' } : undefined);
    build.onLoad({ filter: /.*/, namespace: 'pino-main-thread' }, () => ({ loader: 'js', contents: 'module.exports = { isMainThread: true }' }));
  },
};

export async function bundle(outdir = `${root}/${BUNDLE_DIR}`, opts: { pinoTransports?: boolean } = {}): Promise<void> {
  rmSync(outdir, { recursive: true, force: true });
  await esbuild.build({
    entryPoints: { main: `${root}/src/cli/main.ts` },
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    minify: !process.env.BS_NO_MINIFY, // BS_NO_MINIFY=1: readable names and lines in CPU profiles (bench --cpu-prof)
    // No keepNames: it wraps every named closure in __name(), a defineProperty per closure made, which was 15% of
    // the full-table ingest's CPU. Every Error subclass sets its own `name`; stack traces map back
    // through the .map files (node --enable-source-maps).
    keepNames: false,
    sourcemap: 'linked', // a .map beside each chunk for `node --enable-source-maps`; costs nothing unless enabled
    external: ['etcd3', 'prom-client', 'koffi', 'fs-native-extensions', 'msgpackr-extract'],
    // The bundled CommonJS packages (yaml, pino) call require() for Node's built-ins.
    banner: { js: "import { createRequire as __bsCreateRequire } from 'node:module'; const require = __bsCreateRequire(import.meta.url);" },
    plugins: opts.pinoTransports ? [] : [pinoWithoutTransports],
    logLevel: 'warning',
    legalComments: 'none',
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await bundle();
