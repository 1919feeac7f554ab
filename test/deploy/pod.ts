// A DaemonSet's pod as a node would run it, rendered from the manifest into a temp folder: each volume becomes a
// folder (a ConfigMap's or Secret's files laid out as kubelet does: the keys are symlinks to ..data/KEY, ..data to a
// timestamped folder holding the files, the volume folder world-writable as kubelet leaves it, the files with the
// volume's defaultMode), a hostPath a folder under the node's "host" root, and every path a container names that is
// under a volume's mountPath (in its command and args, and in the ConfigMap's files, which the containers read
// as paths in their own view) is moved onto that folder. The downward API's fields come from the node's facts.
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export const repoRoot = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');

/** The Secret an operator creates (docs/guides/deploying.md), with stand-in contents (no etcd answers here). */
export const ETCD_SECRET = {
  'blockspeaker-etcd': { endpoints: 'https://10.0.0.5:2379,https://10.0.0.6:2379', 'ca.crt': 'CA', 'tls.crt': 'CERT', 'tls.key': 'KEY', password: 'secret' },
};

export interface Manifest {
  file: string;
  docs: Obj[];
  configMap: Obj;
  daemonSet: Obj;
  /** The pod template's spec. */
  pod: Obj;
}

/** Every document of deploy/FILE, parsed (a YAML error throws, naming the file). */
export function manifest(file: string): Manifest {
  const docs = parseAllDocuments(readFileSync(join(repoRoot, 'deploy', file), 'utf8')).map((d) => {
    if (d.errors.length) throw new Error(`deploy/${file}: ${d.errors[0]!.message}`);
    return d.toJS() as Obj;
  });
  const configMap = docs.find((d) => d.kind === 'ConfigMap')!;
  const daemonSet = docs.find((d) => d.kind === 'DaemonSet')!;
  return { file, docs, configMap, daemonSet, pod: daemonSet?.spec.template.spec };
}

export interface NodeFacts {
  /** spec.nodeName */
  name: string;
  /** status.hostIP */
  ip: string;
}

export interface RenderedContainer {
  name: string;
  /** command + args, paths moved onto the pod's folders. */
  argv: string[];
  /** env: values and downward-API fields filled in. */
  env: Record<string, string>;
  /** The folders this container sees read-only (ConfigMap and Secret volumes always, others when mounted readOnly). */
  readOnly: string[];
}

export interface RenderedPod {
  /** The node's host file system root (hostPath volumes are under it). */
  host: string;
  /** A path in a container's view (or a host path of a hostPath volume) as a path under the pod's folders. */
  path(p: string): string;
  /** Paths in `text` moved the same way (what the containers read from the ConfigMap). */
  text(text: string): string;
  initContainers: RenderedContainer[];
  containers: RenderedContainer[];
  /** Each volume's folder by volume name. */
  volumes: Map<string, string>;
}

/** The image's own files: where they are here (the Linux image's /app is this checkout, built). */
export interface ImageFiles {
  /** Container path prefix -> folder here, e.g. { '/app': repoRoot }. */
  [prefix: string]: string;
}

const FIELDS: Record<string, (n: NodeFacts) => string> = {
  'spec.nodeName': (n) => n.name,
  'status.hostIP': (n) => n.ip,
  'status.podIP': (n) => n.ip, // host network: the pod's address is the node's
};

/** kubelet's atomic-writer layout of a ConfigMap or Secret volume with these files. */
function writeAtomicVolume(dir: string, files: Record<string, string>, mode: number, dirMode: number): void {
  mkdirSync(dir, { recursive: true });
  const ts = '..2026_01_01_00_00_00.000000001';
  mkdirSync(join(dir, ts), { mode: 0o755 });
  for (const [k, v] of Object.entries(files)) {
    writeFileSync(join(dir, ts, k), v);
    chmodSync(join(dir, ts, k), mode);
    symlinkSync(join('..data', k), join(dir, k));
  }
  symlinkSync(ts, join(dir, '..data'));
  chmodSync(dir, dirMode);
}

/**
 * Lay the pod's volumes out under `root` and render its containers for one node. `secrets` holds each Secret's files
 * by secret name; `image` maps the image's paths (its executables, its app) onto this machine.
 */
export function renderPod(m: Manifest, root: string, node: NodeFacts, secrets: Record<string, Record<string, string>>, image: ImageFiles): RenderedPod {
  const host = join(root, 'host');
  mkdirSync(host, { recursive: true });
  const volumes = new Map<string, string>();
  const map = new Map<string, string>(Object.entries(image)); // path prefix -> folder
  const add = (prefix: string, dir: string, what: string) => {
    const have = map.get(prefix);
    if (have !== undefined && have !== dir) throw new Error(`${m.file}: ${prefix} is two different folders (${what})`);
    map.set(prefix, dir);
  };
  // The ConfigMap's files are rewritten once the map is complete (they name paths of the other volumes).
  const configMaps: { dir: string; files: Record<string, string>; mode: number }[] = [];
  for (const v of m.pod.volumes as Obj[]) {
    let dir: string;
    if (v.hostPath) {
      dir = join(host, v.hostPath.path);
      mkdirSync(dir, { recursive: true });
      add(v.hostPath.path, dir, `hostPath ${v.name}`);
    } else if (v.configMap) {
      if (v.configMap.name !== m.configMap.metadata.name) throw new Error(`${m.file}: volume ${v.name} names ConfigMap ${v.configMap.name}, not this file's`);
      dir = join(root, 'volumes', v.name);
      configMaps.push({ dir, files: m.configMap.data, mode: v.configMap.defaultMode ?? 0o644 });
    } else if (v.secret) {
      const files = secrets[v.secret.secretName];
      if (!files) throw new Error(`${m.file}: volume ${v.name} needs Secret ${v.secret.secretName}; the test gives ${Object.keys(secrets).join(', ')}`);
      dir = join(root, 'volumes', v.name);
      writeAtomicVolume(dir, files, v.secret.defaultMode ?? 0o644, 0o1777); // a tmpfs, sticky and world-writable
    } else if (v.emptyDir) {
      dir = join(root, 'volumes', v.name);
      mkdirSync(dir, { recursive: true });
    } else throw new Error(`${m.file}: volume ${v.name}: a kind this renderer does not know (${Object.keys(v).join(', ')})`);
    volumes.set(v.name, dir);
  }
  const all = [...(m.pod.initContainers ?? []), ...m.pod.containers] as Obj[];
  for (const c of all) {
    for (const mt of c.volumeMounts ?? []) {
      const dir = volumes.get(mt.name);
      if (!dir) throw new Error(`${m.file}: ${c.name} mounts ${mt.name}, which is not a volume`);
      add(mt.mountPath, dir, `${c.name} mount ${mt.name}`);
      // The host's folder mounted at ROOT + its own path: ROOT is the host's / (install-cni --host-root).
      const hp = (m.pod.volumes as Obj[]).find((v) => v.name === mt.name)?.hostPath?.path as string | undefined;
      if (hp && mt.mountPath !== hp && mt.mountPath.endsWith(hp)) add(mt.mountPath.slice(0, -hp.length), host, `${c.name}: the host's root`);
    }
  }
  const prefixes = [...map.keys()].sort((a, b) => b.length - a.length);
  const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // A path starts at a boundary (not inside another path or word) and the prefix ends at one.
  const re = new RegExp(`(?<![\\w./-])(${prefixes.map(esc).join('|')})(?=$|[/\\s"',;:}\\]])`, 'g');
  const text = (s: string) => s.replace(re, (p) => map.get(p)!);
  const path = (p: string) => text(p);
  for (const cmv of configMaps) {
    const files = Object.fromEntries(Object.entries(cmv.files).map(([k, v]) => [k, text(v)]));
    writeAtomicVolume(cmv.dir, files, cmv.mode, 0o777); // on the node's disk, world-writable (kubelet's default)
  }
  const render = (c: Obj): RenderedContainer => {
    const env: Record<string, string> = {};
    for (const e of c.env ?? []) {
      if (e.value !== undefined) env[e.name] = String(e.value);
      else if (e.valueFrom?.fieldRef) {
        const f = FIELDS[e.valueFrom.fieldRef.fieldPath];
        if (!f) throw new Error(`${m.file}: ${c.name} env ${e.name}: field ${e.valueFrom.fieldRef.fieldPath} is not rendered here`);
        env[e.name] = f(node);
      } else throw new Error(`${m.file}: ${c.name} env ${e.name}: only values and fieldRefs are rendered`);
    }
    const readOnly = ((c.volumeMounts ?? []) as Obj[]).filter((mt) => {
      const v = (m.pod.volumes as Obj[]).find((x) => x.name === mt.name)!;
      return mt.readOnly === true || v.configMap || v.secret;
    }).map((mt) => volumes.get(mt.name)!);
    return { name: c.name, argv: [...(c.command ?? []), ...(c.args ?? [])].map(String).map(path), env, readOnly };
  };
  return {
    host, path, text, volumes,
    initContainers: ((m.pod.initContainers ?? []) as Obj[]).map(render),
    containers: (m.pod.containers as Obj[]).map(render),
  };
}
