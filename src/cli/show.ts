// `blockspeaker show ...` and `blockspeaker ipam --daemon ...`: ask the running daemon over its control socket.
// Human tables by default, --json for the raw replies.
import { loadConfig } from '../config/config.ts';
import { IpcError, ipcRequest } from '../ipc/client.ts';
import { DEFAULT_SOCKET, type AssignReply, type ReleaseReply } from '../ipc/protocol.ts';
import { CliError, intOption, parse } from './args.ts';

const HELP = `usage: blockspeaker show [--socket PATH | -c FILE] [--json] <what>

  peers                 BGP sessions: state, uptime, prefixes received/accepted/sent, last error
  route                 best routes in the daemon's RIB
  route for ADDR        the longest match for an address
  route PREFIX          one prefix
  ipam                  pools and blocks with utilisation, and what this node announces
  status                node, ASN, router ID, uptime, readiness

  The socket is --socket PATH, else the ipc.path of the config -c FILE, else $BLOCKSPEAKER_SOCKET, else
  ${DEFAULT_SOCKET}. Address assignment against the daemon: blockspeaker ipam --daemon assign|release (see there).
`;

const IPAM_HELP = `usage: blockspeaker ipam --daemon [--socket PATH | -c FILE] [--json] <command>

  assign [--handle ID] [--num4 N] [--num6 N] [--pool NAME ...]   addresses for a handle from this node's daemon
                                                                 (a retry with the same handle returns the same ones)
  release --handle ID [--handle ID ...]                          give a handle's addresses back

  Without --daemon/--socket, "blockspeaker ipam" works on the store directly (--store DIR).
`;

interface Common {
  socket: string;
  json: boolean;
  rest: string[];
  help: boolean;
}

/** Pull the socket/config/json options out of argv, wherever they are. */
export function common(argv: string[]): Common {
  let socket: string | undefined;
  let config: string | undefined;
  let json = false;
  let help = false;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--socket') socket = argv[++i];
    else if (a.startsWith('--socket=')) socket = a.slice('--socket='.length);
    else if (a === '-c' || a === '--config') config = argv[++i];
    else if (a === '--json') json = true;
    else if (a === '--daemon') continue;
    else if (a === '--help' || a === '-h') help = true;
    else rest.push(a);
  }
  if (socket === '' || (socket === undefined && argv.includes('--socket'))) throw new CliError('--socket needs a path');
  if (socket === undefined && config !== undefined) {
    const cfg = loadConfig(config);
    if (!cfg.ipc) throw new CliError(`${config}: ipc is off in this config (no control socket)`);
    socket = cfg.ipc.path;
  }
  return { socket: socket ?? process.env.BLOCKSPEAKER_SOCKET ?? DEFAULT_SOCKET, json, rest, help };
}

/** A daemon request; an unreachable daemon is one clear line, not a stack. */
export async function ask<T>(socket: string, method: string, params: unknown = {}): Promise<T> {
  try {
    return await ipcRequest<T>(socket, method, params);
  } catch (e) {
    if (e instanceof IpcError) {
      const err = new Error(e.code === 'REMOTE' ? `daemon: ${e.message}` : `${e.message}${e.code === 'NOT_RUNNING' ? ' — start it with: blockspeaker run -c FILE' : ''}`);
      err.name = 'StoreError'; // main.ts prints known error kinds as one line, exit 1
      throw err;
    }
    throw e;
  }
}

/** Columns padded to their widest cell. */
export function table(head: string[], rows: (string | number)[][]): string {
  const cells = [head, ...rows.map((r) => r.map(String))];
  const w = head.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(w[i]))).join('  ').trimEnd()).join('\n') + '\n';
}

const out = (s: string) => process.stdout.write(s);
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

export function duration(s: number): string {
  if (s <= 0) return '-';
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  return d ? `${d}d${h}h` : h ? `${h}h${m}m` : `${m}m${s % 60}s`;
}

export async function run(argv: string[]): Promise<number> {
  const c = common(argv);
  const [what, ...args] = c.rest;
  if (c.help || !what) {
    out(HELP);
    return what || c.help ? 0 : 2;
  }
  switch (what) {
    case 'peers': {
      if (args.length) throw new CliError(`show peers: unexpected "${args[0]}"`);
      const peers = await ask<{ address: string; asn: number; state: string; uptime: number; lastError: string | null;
        prefixes: { received: number; accepted: number; sent: number } }[]>(c.socket, 'show.peers');
      if (c.json) return out(JSON.stringify(peers) + '\n'), 0;
      if (!peers.length) return out('no BGP peers configured\n'), 0;
      out(table(['PEER', 'ASN', 'STATE', 'UPTIME', 'RECEIVED', 'ACCEPTED', 'SENT', 'LAST ERROR'],
        peers.map((p) => [p.address, p.asn, p.state, duration(p.uptime), p.prefixes.received, p.prefixes.accepted, p.prefixes.sent, p.lastError ?? '-'])));
      return 0;
    }
    case 'route': {
      let q: { lpm?: string; prefix?: string } = {};
      if (args[0] === 'for' && args.length === 2) q = { lpm: args[1] };
      else if (args.length === 1 && args[0] !== 'for') q = { prefix: args[0] };
      else if (args.length) throw new CliError('show route: expected nothing, "for ADDR" or a PREFIX');
      const routes = await ask<{ prefix: string; source: string; nextHop: string | null; asPath: string; origin: string | null; communities?: string[] }[]>(c.socket, 'show.routes', q);
      if (c.json) return out(JSON.stringify(routes) + '\n'), 0;
      if (!routes.length) {
        out(q.lpm ? `no route covers ${q.lpm}\n` : q.prefix ? `no route for ${q.prefix}\n` : 'no routes\n');
        return q.lpm || q.prefix ? 1 : 0;
      }
      out(table(['PREFIX', 'NEXT HOP', 'SOURCE', 'AS PATH', 'ORIGIN', 'COMMUNITIES'],
        routes.map((r) => [r.prefix, r.nextHop ?? '-', r.source, r.asPath || '-', r.origin ?? '-', r.communities?.length ? r.communities.join(' ') : '-'])));
      return 0;
    }
    case 'ipam': {
      if (args.length) throw new CliError(`show ipam: unexpected "${args[0]}"`);
      const r = await ask<{ host: string; announced: string[]; pools: { name: string; cidr: string; blocks: number; allocated: number; free: number; reserved: number; utilisation: number }[];
        blocks: { cidr: string; pool: string; affinity: string | null; allocated: number; free: number; reserved: number; utilisation: number }[] }>(c.socket, 'show.ipam');
      if (c.json) return out(JSON.stringify(r) + '\n'), 0;
      out(table(['POOL', 'CIDR', 'BLOCKS', 'ALLOCATED', 'FREE', 'RESERVED', 'USED'],
        r.pools.map((p) => [p.name, p.cidr, p.blocks, p.allocated, p.free, p.reserved, pct(p.utilisation)])));
      out('\n');
      out(r.blocks.length ? table(['BLOCK', 'POOL', 'AFFINITY', 'ALLOCATED', 'FREE', 'RESERVED', 'USED'],
        r.blocks.map((b) => [b.cidr, b.pool, b.affinity ?? '-', b.allocated, b.free, b.reserved, pct(b.utilisation)])) : 'no blocks yet\n');
      out(`\n${r.host} announces: ${r.announced.length ? r.announced.join(', ') : 'nothing'}\n`);
      return 0;
    }
    case 'status': {
      const s = await ask<Record<string, unknown>>(c.socket, 'show.status');
      if (c.json) return out(JSON.stringify(s) + '\n'), 0;
      const ready = s.ready as Record<string, boolean>;
      out(`node ${s.node}  asn ${s.asn ?? '-'}  router-id ${s.routerId ?? '-'}  pid ${s.pid}  up ${duration(s.uptime as number)}\n` +
        `ready ${ready.ready} (store ${ready.store}, speaker ${ready.speaker}, dataplane ${ready.dataplane})\n`);
      return 0;
    }
    default:
      throw new CliError(`show: unknown "${what}" (peers, route, ipam, status)`);
  }
}

/** `blockspeaker ipam --daemon|--socket PATH assign|release ...` (called by src/cli/ipam.ts). */
export async function ipamViaDaemon(argv: string[]): Promise<number> {
  const c = common(argv);
  const [cmd, ...args] = c.rest;
  if (c.help || !cmd) {
    out(IPAM_HELP);
    return cmd || c.help ? 0 : 2;
  }
  if (cmd === 'assign') {
    const { values: v } = parse('ipam assign', args, {
      handle: { type: 'string' }, num4: { type: 'string' }, num6: { type: 'string' }, pool: { type: 'string', multiple: true },
    });
    const num4 = intOption('ipam assign', 'num4', v.num4, 0, 1024);
    const num6 = intOption('ipam assign', 'num6', v.num6, 0, 1024);
    const handle = v.handle ?? `cli-${process.pid}-${Date.now()}`;
    const r = await ask<AssignReply>(c.socket, 'ipam.assign', { handle, num4, num6, pools: v.pool });
    if (c.json) return out(JSON.stringify(r) + '\n'), 0;
    out(table(['ADDRESS', 'POOL', 'BLOCK', 'BORROWED'], r.ips.map((a) => [`${a.ip}/${a.prefixLen}`, a.pool, a.block, a.borrowed ? 'yes' : 'no'])));
    out(`handle ${r.handle}${r.existing ? ' (already held)' : ''}\n`);
    return 0;
  }
  if (cmd === 'release') {
    const { values: v } = parse('ipam release', args, { handle: { type: 'string', multiple: true } });
    if (!v.handle?.length) throw new CliError('ipam release: --handle ID is required (addresses are released by handle through the daemon)');
    const r = await ask<ReleaseReply>(c.socket, 'ipam.release', { handles: v.handle });
    if (c.json) return out(JSON.stringify(r) + '\n'), 0;
    out(r.released.length ? `released ${r.released.join(', ')}\n` : 'nothing held by that handle\n');
    return 0;
  }
  throw new CliError(`ipam --daemon: unknown command "${cmd}" (assign, release)`);
}
