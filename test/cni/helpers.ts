// Running blockspeaker-cni as a container runtime does: CNI_* environment, network configuration on stdin, and
// reading the result or error object from stdout. Plus a checker of results against the spec's fields.
import { runChild } from '../kit/cli.ts';
import { isIP } from 'node:net';

export const pluginBin = new URL('../../bin/blockspeaker-cni', import.meta.url).pathname;

export interface CniRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON, or undefined when empty. */
  json: any;
}

/**
 * Run `cmd` as a container runtime runs a CNI plugin: asynchronously (the test's own IPC server must keep answering
 * meanwhile), with the test's environment minus CNI_*, tap's variables and NODE_OPTIONS, plus `env`.
 */
export function runAsRuntime(cmd: string, args: string[], env: Record<string, string | undefined>, stdin: string, fromSource = true) {
  const clean: Record<string, string> = {};
  // A runtime's environment: none of the test runner's loaders (NODE_OPTIONS) or tap's variables.
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith('CNI_') || k === 'NODE_OPTIONS' || /^_?TAP/i.test(k)) continue;
    clean[k] = v;
  }
  for (const [k, v] of Object.entries(env)) if (v !== undefined) clean[k] = v;
  if (fromSource) clean.BLOCKSPEAKER_FROM_SOURCE = '1';
  // Through env(1): tap's process-info hook puts its loaders back into NODE_OPTIONS of every child it sees.
  return runChild('/usr/bin/env', ['-u', 'NODE_OPTIONS', cmd, ...args], { env: clean, stdin });
}

/** Spawn the plugin with the network configuration on stdin, its output parsed. */
export async function runPlugin(env: Record<string, string | undefined>, stdin: string | object, opts: { bin?: string; fromSource?: boolean } = {}): Promise<CniRun> {
  const r = await runAsRuntime(opts.bin ?? pluginBin, [], env, typeof stdin === 'string' ? stdin : JSON.stringify(stdin), opts.fromSource ?? true);
  let json: unknown;
  if (r.stdout.trim()) {
    try {
      json = JSON.parse(r.stdout);
    } catch {
      json = undefined;
    }
  }
  return { ...r, json };
}

export function cniEnv(command: string, containerId: string, extra: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  return { CNI_COMMAND: command, CNI_CONTAINERID: containerId, CNI_NETNS: `/var/run/netns/${containerId}`, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni', ...extra };
}

const isCidr = (s: unknown, family?: number): boolean => {
  if (typeof s !== 'string') return false;
  const [a, l, ...rest] = s.split('/');
  const f = isIP(a ?? '');
  return rest.length === 0 && f !== 0 && (family === undefined || f === family) && /^\d+$/.test(l ?? '') && Number(l) <= (f === 4 ? 32 : 128);
};

function atLeast(v: string, min: string): boolean {
  const a = v.split('.').map(Number);
  const b = min.split('.').map(Number);
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! > b[i]!;
  return true;
}

/** Problems with an ADD result per the CNI spec (IPAM plugins leave out "interfaces"); [] when it conforms. */
export function resultProblems(r: any, version: string): string[] {
  const p: string[] = [];
  if (typeof r !== 'object' || r === null) return ['result is not an object'];
  if (r.cniVersion !== version) p.push(`cniVersion ${r.cniVersion} != ${version}`);
  const allowed = new Set(['cniVersion', 'interfaces', 'ips', 'routes', 'dns']);
  for (const k of Object.keys(r)) if (!allowed.has(k)) p.push(`unknown top-level field ${k}`);
  if ('interfaces' in r) p.push('an IPAM plugin must not return interfaces');
  if (!Array.isArray(r.ips)) p.push('ips must be a list');
  for (const [i, ip] of (r.ips ?? []).entries()) {
    const fam = isIP(String(ip.address).split('/')[0]);
    if (!isCidr(ip.address)) p.push(`ips[${i}].address ${ip.address} is not CIDR`);
    if (ip.gateway !== undefined && isIP(ip.gateway) !== fam) p.push(`ips[${i}].gateway ${ip.gateway} is not an address of the same family`);
    if (atLeast(version, '1.0.0')) {
      if ('version' in ip) p.push(`ips[${i}].version was removed in 1.0.0`);
    } else if (ip.version !== String(fam)) p.push(`ips[${i}].version must be "${fam}" before 1.0.0`);
    for (const k of Object.keys(ip)) if (!['address', 'gateway', 'interface', 'version'].includes(k)) p.push(`ips[${i}] unknown field ${k}`);
  }
  if (r.routes !== undefined) {
    if (!Array.isArray(r.routes)) p.push('routes must be a list');
    const extra = atLeast(version, '1.1.0') ? ['mtu', 'advmss', 'priority', 'table', 'scope'] : [];
    for (const [i, rt] of (r.routes ?? []).entries()) {
      if (!isCidr(rt.dst)) p.push(`routes[${i}].dst ${rt.dst} is not CIDR`);
      if (rt.gw !== undefined && isIP(rt.gw) !== isIP(String(rt.dst).split('/')[0])) p.push(`routes[${i}].gw ${rt.gw} is not an address of the dst's family`);
      for (const k of Object.keys(rt)) {
        if (k === 'dst' || k === 'gw') continue;
        if (!extra.includes(k)) p.push(`routes[${i}] field ${k} is not in CNI ${version}`);
        else if (!Number.isInteger(rt[k])) p.push(`routes[${i}].${k} must be an integer`);
      }
    }
  }
  if (typeof r.dns !== 'object' || r.dns === null) p.push('dns must be an object');
  else {
    for (const k of Object.keys(r.dns)) if (!['nameservers', 'domain', 'search', 'options'].includes(k)) p.push(`dns unknown field ${k}`);
  }
  return p;
}

/** Problems with an error object per the spec. */
export function errorProblems(e: any): string[] {
  const p: string[] = [];
  if (typeof e !== 'object' || e === null) return ['error is not a JSON object'];
  if (typeof e.cniVersion !== 'string') p.push('cniVersion missing');
  if (!Number.isInteger(e.code)) p.push('code must be an integer');
  if (typeof e.msg !== 'string' || !e.msg) p.push('msg must be a non-empty string');
  if (e.details !== undefined && typeof e.details !== 'string') p.push('details must be a string');
  for (const k of Object.keys(e)) if (!['cniVersion', 'code', 'msg', 'details'].includes(k)) p.push(`unknown field ${k}`);
  return p;
}
