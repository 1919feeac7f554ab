// The Windows deployment's files: every file deploy/windows/Dockerfile copies, every executable
// deploy/windows/blockspeaker.yaml runs and every file packaging/windows/install.ps1 takes from beside itself is made
// by the package build (`npm run package:windows`, dist/windows; built once by test/windows/harness.ts), and the image
// has every file the executables load beside themselves. Then the HostProcess pod under wine: the image's files and
// the pod's volumes laid out under a CONTAINER_SANDBOX_MOUNT_POINT folder, the DaemonSet's own commands (the
// variable expanded as hcsshim does): `run` (with --check) reads its config, the Secret's endpoints and the TLS and
// password files under the mount point and takes the node from NODE_NAME and NODE_IP; `install-cni` installs the plugin
// under both names and the ConfigMap's network config.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { runWine, windowsDist, zPath } from '../../packaging/windows/wine.ts';
import { windowsReady } from '../windows/harness.ts';
import { ETCD_SECRET, manifest, repoRoot, type Obj } from './pod.ts';

const SANDBOX = '%CONTAINER_SANDBOX_MOUNT_POINT%';
const read = (p: string) => fs.readFileSync(path.join(repoRoot, p), 'utf8');

/** The Dockerfile's COPY lines: each source (relative to the build context) and the destination. */
export function dockerCopies(text: string): { sources: string[]; dest: string }[] {
  // Continuation lines joined; comments dropped.
  const lines = text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  return lines.filter((l) => /^COPY\s/i.test(l)).map((l) => {
    const words = l.split(/\s+/).slice(1).filter((w) => !w.startsWith('--'));
    return { sources: words.slice(0, -1), dest: words[words.length - 1]! };
  });
}

/** The image's files (path in the image -> path here), from the COPY lines. */
function imageFiles(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const c of dockerCopies(text)) {
    for (const src of c.sources) {
      const here = path.join(repoRoot, src);
      const name = c.sources.length === 1 && !c.dest.endsWith('/') ? c.dest : path.posix.join(c.dest, path.posix.basename(src.replace(/\/$/, '')));
      if (fs.existsSync(here) && fs.statSync(here).isDirectory()) {
        const dir = c.dest.endsWith('/') && src.endsWith('/') ? c.dest : name;
        for (const f of fs.readdirSync(here, { recursive: true }) as string[]) {
          if (fs.statSync(path.join(here, f)).isFile()) out.set(path.posix.join(dir, f), path.join(here, f));
        }
      } else out.set(name, here);
    }
  }
  return out;
}

/** Files install.ps1 takes from its own folder: Join-Path $Here (or $PSScriptRoot) 'NAME', or "$Here\NAME". */
function installPs1Files(text: string): string[] {
  const names = [
    ...text.matchAll(/Join-Path\s+(?:-Path\s+)?\$(?:Here|PSScriptRoot)\s+(?:-ChildPath\s+)?['"]([^'"$]+)['"]/gi),
    ...text.matchAll(/"\$(?:Here|PSScriptRoot)\\([^"$]+)"/gi),
  ].map((m) => m[1]!.replaceAll('\\', '/'));
  return [...new Set(names)];
}

t.test('the Dockerfile: copy-only, from the HostProcess base image, files of dist/windows', async (t) => {
  const text = read('deploy/windows/Dockerfile');
  const from = text.split('\n').filter((l) => /^FROM\s/i.test(l));
  t.same(from.length, 1, 'one stage');
  t.match(from[0], /^FROM mcr\.microsoft\.com\/oss\/kubernetes\/windows-host-process-containers-base-image:v\d+\.\d+\.\d+$/, 'the HostProcess base image, pinned');
  const instr = text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')).map((l) => l.split(/\s+/)[0]!.toUpperCase());
  t.same([...new Set(instr)].sort(), ['COPY', 'FROM'], 'only FROM and COPY: nothing runs, so buildx builds it on a Linux host');
  for (const c of dockerCopies(text)) for (const s of c.sources) t.match(s, /^dist\/windows\//, `COPY ${s}: from the package build's output`);
  const ds = manifest('windows/blockspeaker.yaml');
  for (const c of [...ds.pod.initContainers, ...ds.pod.containers] as Obj[]) {
    t.equal(c.image.replace(/:.*/, ''), 'ghcr.io/blockspeaker/blockspeaker-windows', `${c.name}: the image this Dockerfile builds`);
  }
  t.match(text, /-t ghcr\.io\/blockspeaker\/blockspeaker-windows:/, 'the build command names it');
});

t.test('every file the image, the DaemonSet and install.ps1 name is made by the package build', async (t) => {
  if (!windowsReady(t)) return;
  const built = new Set((fs.readdirSync(windowsDist, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(windowsDist, f)).isFile()).map((f) => f.replaceAll('\\', '/')));
  const image = imageFiles(read('deploy/windows/Dockerfile'));
  for (const [inImage, here] of image) {
    t.ok(fs.existsSync(here) && here.startsWith(windowsDist + path.sep), `image ${inImage}: made by the build (${path.relative(repoRoot, here)})`);
  }
  // What the executables load beside themselves: native addons and etcd's gRPC schema.
  for (const f of built) {
    if (f.endsWith('.node') || f.startsWith('proto/') || /^blockspeaker[\w-]*\.exe$/.test(f)) t.ok(image.has(`/${f}`), `${f}: in the image`);
  }
  // The DaemonSet: each container runs an executable of the image's root.
  const ds = manifest('windows/blockspeaker.yaml');
  for (const c of [...ds.pod.initContainers, ...ds.pod.containers] as Obj[]) {
    const exe = String(c.command[0]);
    t.ok(exe.startsWith(`${SANDBOX}/`), `${c.name}: runs a file of the image (${exe})`);
    const inImage = `/${exe.slice(SANDBOX.length + 1)}`;
    t.ok(image.has(inImage), `${c.name}: ${inImage} is in the image`);
  }
  // install-cni installs blockspeaker-cni.exe from beside blockspeaker.exe.
  t.ok(image.has('/blockspeaker-cni.exe'), 'the CNI plugin is beside blockspeaker.exe in the image (install-cni takes it from there)');
  const ps1 = installPs1Files(read('packaging/windows/install.ps1'));
  t.ok(ps1.includes('blockspeaker.exe'), `install.ps1 names its files (${ps1.join(', ')})`);
  for (const f of ps1) {
    t.ok(built.has(f), `install.ps1 takes ${f} from its folder: the package build makes it`);
  }
});

t.test('the HostProcess pod under wine: run reads the pod under the sandbox mount point; install-cni installs', async (t) => {
  if (!windowsReady(t)) return;
  const m = manifest('windows/blockspeaker.yaml');
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'bs-hpc-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The container's volume: the image's files at its root (linked, not copied: 170 MB), the volumes at their mountPath.
  const sandbox = path.join(dir, 'hpc');
  for (const [inImage, here] of imageFiles(read('deploy/windows/Dockerfile'))) {
    fs.mkdirSync(path.dirname(path.join(sandbox, inImage)), { recursive: true });
    fs.symlinkSync(here, path.join(sandbox, inImage));
  }
  const secrets = ETCD_SECRET as Record<string, Record<string, string>>;
  const mounts = new Map<string, Record<string, string>>();
  for (const v of m.pod.volumes as Obj[]) {
    mounts.set(v.name, v.configMap ? m.configMap.data : secrets[v.secret?.secretName] ?? {});
  }
  for (const c of [...m.pod.initContainers, ...m.pod.containers] as Obj[]) {
    for (const mt of c.volumeMounts ?? []) {
      const at = path.join(sandbox, mt.mountPath);
      fs.mkdirSync(at, { recursive: true });
      for (const [k, v] of Object.entries(mounts.get(mt.name) ?? {})) fs.writeFileSync(path.join(at, k), v);
    }
  }
  const root = `${zPath(sandbox)}\\`;
  const env = { CONTAINER_SANDBOX_MOUNT_POINT: root, NODE_NAME: 'node-7', NODE_IP: '10.0.0.7' };
  /** A container's command as hcsshim starts it: the variable expanded; the executable as a path here. */
  const command = (c: Obj): [string, string[]] => {
    const [exe, ...args] = (c.command as string[]).map((a) => a.replaceAll(SANDBOX, root));
    return [path.join(sandbox, exe!.slice(root.length)), args];
  };
  const main = m.pod.containers[0] as Obj;
  const mainEnv = Object.fromEntries((main.env as Obj[]).filter((e) => e.value !== undefined).map((e) => [e.name, String(e.value)]));
  const [exe, args] = command(main);
  const checked = await runWine(exe, [...args, '--check'], { env: { ...env, ...mainEnv }, timeoutMs: 120_000 });
  t.equal(checked.code, 0, `run --check exits 0 (${checked.stderr.slice(-600)})`);
  const cfg = parseYaml(checked.stdout) as Obj;
  const inSandbox = (p: string) => `${root}${p.replace(/^\//, '').replaceAll('/', '\\')}`;
  t.equal(cfg?.node?.name, 'node-7', 'node.name from NODE_NAME');
  t.equal(cfg?.bgp?.routerId, '10.0.0.7', 'bgp.routerId from NODE_IP');
  t.match(cfg?.node?.bgp?.ipv4Address, /^10\.0\.0\.7\/\d+$/, "the node's address from NODE_IP");
  t.equal(cfg?.ipam?.store, 'etcds://10.0.0.5:2379,10.0.0.6:2379', "the store: the Secret's endpoints, read under the mount point");
  t.equal(cfg?.ipam?.etcd?.ca, inSandbox('/etc/blockspeaker/etcd/ca.crt'), "the CA: the Secret's file under the mount point");
  t.equal(cfg?.ipam?.etcd?.password?.file, inSandbox('/etc/blockspeaker/etcd/password'), 'the password file too');
  t.equal(cfg?.ipc?.path, '\\\\.\\pipe\\blockspeaker', 'a pipe name is left alone');

  // install-cni: the manifest's command, with the host's CNI folders moved into a temp dir (the prefix's C:\ is shared).
  const install = m.pod.initContainers[0] as Obj;
  const [iexe, iargs] = command(install);
  const bin = path.join(dir, 'cni-bin');
  const conf = path.join(dir, 'cni-conf');
  const r = await runWine(iexe, [...iargs, '--bin-dir', zPath(bin), '--conf-dir', zPath(conf)], { env, timeoutMs: 120_000 });
  t.equal(r.code, 0, `install-cni exits 0 (${r.stderr.slice(-600)}${r.stdout.slice(-300)})`);
  const plugin = fs.readFileSync(path.join(windowsDist, 'blockspeaker-cni.exe'));
  for (const name of ['blockspeaker.exe', 'blockspeaker-cni.exe']) {
    t.ok(fs.existsSync(path.join(bin, name)) && fs.readFileSync(path.join(bin, name)).equals(plugin), `${name}: the image's blockspeaker-cni.exe`);
  }
  t.equal(fs.readFileSync(path.join(conf, '10-blockspeaker.conflist'), 'utf8'), m.configMap.data['10-blockspeaker.conflist'], "the ConfigMap's network config");
});
