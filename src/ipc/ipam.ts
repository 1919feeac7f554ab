// The IPAM methods of the control socket, over one Ipam instance and this node's host name.
//
// ipam.assign is idempotent per handle (`${containerId}.${ifname}`): a CNI ADD that is retried gets the addresses
// the handle already holds. Calls for one handle run one after another, so a retry that overlaps a slow first
// attempt cannot allocate twice.
//
// CNI addressing (see AssignParams.addressing). The bridge plugin with isGateway puts `gateway/prefixLen` of every
// pod on the bridge, and an IPv4 bridge takes only one such address: so every pod on a node must present the same
// gateway and prefix length, and the gateway must be on-link for every pod, including one whose address was
// borrowed from another host's block. Hence the default "pool" mode: address/poolLen, gateway = this node's gateway
// address in that pool (allocated once, use Tunnel, from its own block when it can), plus the pool's two halves
// routed via the gateway so pod traffic to other nodes is routed by the host rather than ARPed for on the bridge.
// The pool's network and (IPv4) broadcast addresses are never handed to a pod in that mode: they are parked under a
// reserved handle when IPAM returns them.
import { formatIP, ipAt, maxLen, parseIP, parsePrefix, prefixContainsIP, subnetAt, subnetCount, type Prefix } from '../net/ip.ts';
import { affineHost, ordinalsOfHandle } from '../ipam/block.ts';
import type { Ipam } from '../ipam/ipam.ts';
import { parseSelector } from '../calico/selector.ts';
import { IpamError, type AssignResult, type Pool } from '../ipam/types.ts';
import type {
  Addressing,
  AssignParams,
  AssignReply,
  AvailableParams,
  AvailableReply,
  Availability,
  CheckParams,
  CheckReply,
  CniIP,
  CniRoute,
  Family,
  GatewayParams,
  HandleInfo,
  HandlesParams,
  HeldAddress,
  ReleaseParams,
  ReleaseReply,
} from './protocol.ts';
import { RESERVED_HANDLE_PREFIX, isReservedContainerId } from './protocol.ts';
import { keyedSerial } from './serial.ts';
import type { IpcHandler } from './server.ts';

const ROLE = 'blockspeaker.role';

const invalid = (msg: string): never => {
  throw new IpamError('INVALID', msg);
};

function str(v: unknown, what: string): string {
  if (typeof v !== 'string' || v === '') invalid(`${what} must be a non-empty string`);
  return v as string;
}

function count(v: unknown, what: string): number {
  if (v === undefined) return 0;
  if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > 16) invalid(`${what} must be a whole number from 0 to 16`);
  return v as number;
}

function strList(v: unknown, what: string): string[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) invalid(`${what} must be a list of strings`);
  return v as string[];
}

function attrMap(v: unknown, what: string): Record<string, string> | undefined {
  if (v === undefined) return undefined;
  if (!v || typeof v !== 'object' || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string')) {
    invalid(`${what} must be an object of strings`);
  }
  return v as Record<string, string>;
}

function bareIP(text: string): string {
  const slash = text.indexOf('/');
  return formatIP(parseIP(slash < 0 ? text : text.slice(0, slash)));
}

export interface IpamHandlerOptions {
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /**
   * The dataplane's own gateway for a pool (HNS: the address its addressing model reserves), used for `gateway:
   * auto` instead of an address held under the node's gateway handle; prefixLen is the subnet pods sit in. null:
   * the pool has none yet (an error for the ADD).
   */
  dataplaneGateway?: (pool: string, family: Family) => Promise<{ gateway: string; prefixLen: number } | null>;
  /**
   * Resolves once the dataplane can carry these addresses (HNS: their blocks' ip-subnets are programmed), before a
   * CNI result is returned; rejects (IpamError NOT_READY) after a bounded wait, and the ADD fails to be retried.
   */
  dataplaneReady?: (ips: readonly string[]) => Promise<void>;
}

export function ipamHandlers(ipam: Ipam, host: string, opts: IpamHandlerOptions = {}): Record<string, IpcHandler> {
  const log = opts.log ?? (() => undefined);
  const gatewayHandle = (pool: string) => `${RESERVED_HANDLE_PREFIX}gateway.${host}.${pool}`;
  const parkHandle = `${RESERVED_HANDLE_PREFIX}reserved.${host}`;

  // Per-handle serialisation.
  const serial = keyedSerial();

  async function poolsByName(): Promise<Map<string, Pool>> {
    return new Map((await ipam.listPools()).map((p) => [p.name, p]));
  }

  /** The addresses a handle holds, read from its blocks. */
  async function held(handle: string, pools?: Map<string, Pool>): Promise<HeldAddress[]> {
    const rec = await ipam.ds.handle(handle);
    if (!rec) return [];
    const byName = pools ?? (await poolsByName());
    const out: HeldAddress[] = [];
    for (const cidr of Object.keys(rec.value.blocks)) {
      const b = await ipam.ds.block(cidr);
      if (!b) continue;
      const prefix = parsePrefix(cidr);
      for (const o of ordinalsOfHandle(b.value, handle)) {
        out.push({
          ip: formatIP(ipAt(prefix, o)),
          family: prefix.family,
          pool: b.value.pool,
          poolCidr: byName.get(b.value.pool)?.cidr ?? cidr,
          block: cidr,
          prefixLen: prefix.len,
          borrowed: affineHost(b.value) !== host,
        });
      }
    }
    return out.sort((a, b) => a.family - b.family || (a.ip < b.ip ? -1 : 1));
  }

  function fromResult(r: AssignResult, pools: Map<string, Pool>, affine: (block: string) => boolean): HeldAddress[] {
    return [...r.ipv4, ...r.ipv6].map((a) => ({
      ip: a.ip,
      family: a.family,
      pool: a.pool,
      poolCidr: pools.get(a.pool)?.cidr ?? a.block,
      block: a.block,
      prefixLen: a.prefixLen,
      borrowed: !affine(a.block),
    }));
  }

  /** The pool's own network address, and for IPv4 its broadcast address: unusable as pod addresses in pool mode. */
  function isPoolEdge(a: HeldAddress): boolean {
    const pool = parsePrefix(a.poolCidr);
    if (pool.len >= maxLen(pool.family) - 1) return false;
    const ip = parseIP(a.ip);
    if (formatIP(ipAt(pool, 0)) === a.ip) return true;
    return pool.family === 4 && formatIP(ipAt(pool, 2 ** (32 - pool.len) - 1)) === a.ip && prefixContainsIP(pool, ip);
  }

  /**
   * autoAssign, then (when asked) trade pool-edge addresses for others: an edge address is released and taken again
   * under the reserved handle so nobody gets it, and a replacement is asked for. Bounded, as edges are at most 3.
   */
  async function allocate(args: { handle: string; num4: number; num6: number; pools?: string[]; attrs?: Record<string, string>; use?: 'Workload' | 'Tunnel'; avoidEdges: boolean }): Promise<{ got: HeldAddress[]; messages: string[] }> {
    const pools = await poolsByName();
    const affineBlocks = new Set((await ipam.blocks(host)).map((b) => b.cidr));
    const got: HeldAddress[] = [];
    const messages: string[] = [];
    let want4 = args.num4;
    let want6 = args.num6;
    for (let round = 0; round < 4 && (want4 > 0 || want6 > 0); round++) {
      const r = await ipam.autoAssign({ host, num4: want4, num6: want6, handle: args.handle, pools: args.pools, attrs: args.attrs, use: args.use });
      // Blocks claimed by this call are ours too.
      if ([...r.ipv4, ...r.ipv6].some((a) => !affineBlocks.has(a.block))) for (const b of await ipam.blocks(host)) affineBlocks.add(b.cidr);
      const fresh = fromResult(r, pools, (b) => affineBlocks.has(b));
      want4 -= r.ipv4.length;
      want6 -= r.ipv6.length;
      messages.push(...r.messages);
      for (const a of fresh) {
        if (args.avoidEdges && isPoolEdge(a)) {
          await ipam.releaseIPs([a.ip]);
          await ipam.assignIP({ host, ip: a.ip, handle: parkHandle, attrs: { [ROLE]: 'reserved' } }).catch((e) => log('could not park a pool edge address', { ip: a.ip, error: String(e) }));
          if (a.family === 4) want4++;
          else want6++;
          continue;
        }
        got.push(a);
      }
      if (r.messages.length) break;
    }
    return { got, messages };
  }

  async function gatewayFor(poolName: string, family: Family): Promise<HeldAddress> {
    const handle = gatewayHandle(poolName);
    return serial(handle, async () => {
      const have = (await held(handle)).find((a) => a.family === family);
      if (have) return have;
      let res: { got: HeldAddress[]; messages: string[] };
      try {
        res = await allocate({
          handle,
          num4: family === 4 ? 1 : 0,
          num6: family === 6 ? 1 : 0,
          pools: [poolName],
          use: 'Tunnel',
          attrs: { [ROLE]: 'gateway' },
          avoidEdges: true,
        });
      } catch (e) {
        if (e instanceof IpamError && e.code === 'NO_POOL_FOR_USE') {
          throw new IpamError('NO_POOL_FOR_USE', `the node gateway address comes from pool ${poolName} with use Tunnel, which the pool does not allow: add Tunnel to its allowedUses, or set an explicit gateway in the CNI ipam config`);
        }
        throw e;
      }
      const gw = res.got[0];
      if (!gw) throw new IpamError('NO_POOL', `no address left in pool ${poolName} for this node's gateway: ${res.messages.join('; ')}`);
      log('allocated the node gateway address', { pool: poolName, ip: gw.ip, borrowed: gw.borrowed });
      return gw;
    });
  }

  function checkAddressing(a: unknown): Addressing {
    if (!a || typeof a !== 'object' || Array.isArray(a)) invalid('addressing must be an object');
    const x = a as Addressing;
    if (x.prefix !== undefined && x.prefix !== 'pool' && x.prefix !== 'host') invalid(`addressing.prefix must be "pool" or "host", got ${JSON.stringify(x.prefix)}`);
    if (x.gateway !== undefined && x.gateway !== 'auto' && x.gateway !== 'none') {
      const list = strList(x.gateway, 'addressing.gateway (auto, none, or a list of addresses)')!;
      const seen = new Set<number>();
      for (const g of list) {
        let f: Family;
        try {
          f = parseIP(g).family;
        } catch {
          return invalid(`gateway "${g}" is not an IP address`);
        }
        if (seen.has(f)) invalid(`gateway lists two IPv${f} addresses`);
        seen.add(f);
      }
    }
    if (x.poolRoutes !== undefined && typeof x.poolRoutes !== 'boolean') invalid('addressing.poolRoutes must be true or false');
    if (x.routes !== undefined) {
      if (!Array.isArray(x.routes)) invalid('routes must be a list of {dst, gw?}');
      for (const r of x.routes!) {
        if (!r || typeof r !== 'object') invalid('routes must be a list of {dst, gw?}');
        try {
          parsePrefix(r.dst);
        } catch (e) {
          invalid(`route dst: ${(e as Error).message}`);
        }
        if (r.gw !== undefined) {
          try {
            if (parseIP(r.gw).family !== parsePrefix(r.dst).family) invalid(`route ${r.dst}: gw ${r.gw} is of the other address family`);
          } catch (e) {
            if (e instanceof IpamError) throw e;
            invalid(`route ${r.dst}: gw "${r.gw}" is not an IP address`);
          }
        }
      }
    }
    return x;
  }

  /** What the pod gets: addresses with their prefix length, gateways, and routes. */
  async function cniView(ips: HeldAddress[], a: Addressing): Promise<{ ips: CniIP[]; routes: CniRoute[] }> {
    const mode = a.prefix ?? 'pool';
    const gwMode = a.gateway ?? 'auto';
    const out: CniIP[] = [];
    const routes: CniRoute[] = [];
    const gwOf = new Map<Family, string>();
    const poolsRouted = new Set<string>();
    for (const addr of ips) {
      let gw: string | undefined;
      let subnetLen: number | undefined;
      if (gwMode === 'auto' && opts.dataplaneGateway) {
        const d = await opts.dataplaneGateway(addr.pool, addr.family);
        if (!d) throw new IpamError('NO_POOL', `the dataplane has no gateway for pool ${addr.pool} on this node yet (see /dataplane)`);
        gw = d.gateway;
        subnetLen = d.prefixLen;
      } else if (gwMode === 'auto') gw = (await gatewayFor(addr.pool, addr.family)).ip;
      else if (Array.isArray(gwMode)) gw = gwMode.map((g) => formatIP(parseIP(g))).find((g) => parseIP(g).family === addr.family);
      const pool = parsePrefix(addr.poolCidr);
      const len = mode === 'host' ? maxLen(addr.family) : subnetLen ?? pool.len;
      out.push(gw ? { family: addr.family, address: `${addr.ip}/${len}`, gateway: gw } : { family: addr.family, address: `${addr.ip}/${len}` });
      if (!gw) continue;
      if (!gwOf.has(addr.family)) gwOf.set(addr.family, gw);
      if (mode === 'host') routes.push({ dst: `${gw}/${maxLen(addr.family)}`, scope: 253 });
      if ((a.poolRoutes ?? true) && !poolsRouted.has(addr.poolCidr)) {
        poolsRouted.add(addr.poolCidr);
        for (const half of halves(pool, mode)) routes.push({ dst: half.toString(), gw });
      }
    }
    for (const r of a.routes ?? []) {
      const dst = parsePrefix(r.dst);
      const gw = r.gw ? formatIP(parseIP(r.gw)) : gwOf.get(dst.family);
      routes.push(gw ? { dst: dst.toString(), gw } : { dst: dst.toString() });
    }
    const seen = new Set<string>();
    return { ips: out, routes: routes.filter((r) => !seen.has(r.dst) && seen.add(r.dst)) };
  }

  /** Pool mode: the halves, more specific than the on-link pool. Host mode: the pool itself (nothing is on-link). */
  function halves(pool: Prefix, mode: 'pool' | 'host'): Prefix[] {
    if (mode === 'host') return [pool];
    if (pool.len >= maxLen(pool.family)) return [];
    return [subnetAt(pool, pool.len + 1, 0), subnetAt(pool, pool.len + 1, 1)];
  }

  const assign = async (p: AssignParams): Promise<AssignReply> => {
    if (!p || typeof p !== 'object') invalid('params must be an object');
    if (p.handle === undefined && isReservedContainerId(str(p.containerId, 'containerId'))) {
      invalid(`containerId "${p.containerId}" starts with ${RESERVED_HANDLE_PREFIX}, which names the node's own addresses`);
    }
    const handle = p.handle !== undefined ? str(p.handle, 'handle') : `${str(p.containerId, 'containerId')}.${str(p.ifname, 'ifname')}`;
    let num4 = count(p.num4, 'num4');
    const num6 = count(p.num6, 'num6');
    if (p.num4 === undefined && p.num6 === undefined) num4 = 1;
    if (num4 + num6 === 0) invalid('ask for at least one address (num4, num6)');
    const pools = strList(p.pools, 'pools');
    const attrs = attrMap(p.attrs, 'attrs');
    const addressing = p.addressing === undefined ? undefined : checkAddressing(p.addressing);
    return serial(handle, async () => {
      const poolMap = await poolsByName();
      for (const want of pools ?? []) {
        if (![...poolMap.values()].some((x) => x.name === want || x.cidr === want)) invalid(`pool ${want} does not exist`);
      }
      const have = await held(handle, poolMap);
      const have4 = have.filter((a) => a.family === 4).length;
      const have6 = have.filter((a) => a.family === 6).length;
      const existing = have4 >= num4 && have6 >= num6 && have.length > 0;
      let ips = have;
      if (!existing) {
        const { got, messages } = await allocate({
          handle,
          num4: Math.max(0, num4 - have4),
          num6: Math.max(0, num6 - have6),
          pools,
          attrs,
          avoidEdges: (addressing?.prefix ?? 'pool') === 'pool' && addressing !== undefined,
        });
        ips = [...have, ...got];
        if (ips.filter((a) => a.family === 4).length < num4 || ips.filter((a) => a.family === 6).length < num6) {
          // All or nothing: a pod with half its addresses is worse than a retried ADD.
          await ipam.releaseByHandle(handle);
          throw new IpamError('NO_POOL', `could not assign ${num4} IPv4 and ${num6} IPv6 addresses to ${handle}: ${messages.join('; ') || 'no free addresses'}`);
        }
        ips.sort((a, b) => a.family - b.family || (a.ip < b.ip ? -1 : 1));
        log('assigned', { handle, ips: ips.map((a) => a.ip) });
      }
      const reply: AssignReply = { handle, existing, ips };
      if (addressing) {
        try {
          reply.cni = await cniView(ips, addressing);
          await opts.dataplaneReady?.(ips.map((a) => a.ip));
        } catch (e) {
          // No gateway, no pod: the ADD fails as a whole and leaves nothing behind.
          if (!existing) await ipam.releaseByHandle(handle);
          throw e;
        }
      }
      return reply;
    });
  };

  const release = async (p: ReleaseParams): Promise<ReleaseReply> => {
    const list = p?.handles !== undefined ? strList(p.handles, 'handles')! : [str(p?.handle, 'handle')];
    const released: string[] = [];
    for (const h of list) released.push(...(await serial(h, () => ipam.releaseByHandle(h))));
    if (released.length) log('released', { handles: list, ips: released });
    return { released };
  };

  const check = async (p: CheckParams): Promise<CheckReply> => {
    const handle = str(p?.handle, 'handle');
    const want = new Set((strList(p.ips, 'ips') ?? []).map((t) => {
      try {
        return bareIP(t);
      } catch {
        return invalid(`ips: "${t}" is not an address`);
      }
    }));
    const have = new Set((await held(handle)).map((a) => a.ip));
    const missing = [...want].filter((x) => !have.has(x));
    const extra = [...have].filter((x) => !want.has(x));
    return { ok: missing.length === 0 && extra.length === 0, held: [...have], missing, extra };
  };

  const handles = async (p: HandlesParams): Promise<{ handles: HandleInfo[] }> => {
    const want = attrMap(p?.attrs, 'attrs') ?? {};
    const byHandle = new Map<string, HandleInfo>();
    // One pass over the blocks: every allocation of this host, grouped by handle.
    for (const { value: b } of await ipam.ds.blocks()) {
      const prefix = parsePrefix(b.cidr);
      b.allocations.forEach((idx, o) => {
        if (idx === null) return;
        const attr = b.attributes[idx];
        if (!attr || attr.host !== host || !attr.handle) return;
        const attrs = attr.attrs ?? {};
        if (Object.entries(want).some(([k, v]) => attrs[k] !== v)) return;
        let info = byHandle.get(attr.handle);
        if (!info) byHandle.set(attr.handle, (info = { handle: attr.handle, ips: [], attrs: { ...attrs } }));
        info.ips.push(formatIP(ipAt(prefix, o)));
      });
    }
    return { handles: [...byHandle.values()].sort((a, b) => (a.handle < b.handle ? -1 : 1)) };
  };

  async function candidatePools(requested: string[] | undefined): Promise<Pool[]> {
    const all = await ipam.listPools();
    if (requested?.length) return all.filter((p) => requested.includes(p.name) || requested.includes(p.cidr));
    const h = await ipam.getHost(host);
    const labels = h?.labels ?? {};
    return all.filter((p) => !p.disabled && p.allowedUses.includes('Workload') && parseSelector(p.nodeSelector)(labels));
  }

  const gateway = async (p: GatewayParams): Promise<HeldAddress> => {
    const family = p?.family ?? 4;
    if (family !== 4 && family !== 6) invalid('family must be 4 or 6');
    const pools = (await candidatePools(p?.pool !== undefined ? [str(p.pool, 'pool')] : undefined)).filter((x) => parsePrefix(x.cidr).family === family);
    if (!pools.length) throw new IpamError('NO_POOL', p?.pool ? `pool ${p.pool} does not exist or is not IPv${family}` : `no IPv${family} pool for host ${host}`);
    return gatewayFor(pools[0]!.name, family);
  };

  const available = async (p: AvailableParams): Promise<AvailableReply> => {
    const pools = await candidatePools(strList(p?.pools, 'pools'));
    const h = await ipam.getHost(host);
    if (!h) throw new IpamError('UNKNOWN_HOST', `host "${host}" is not registered with IPAM`);
    const config = await ipam.getConfig();
    const blocks = await ipam.blocks();
    const mine = blocks.filter((b) => b.affinity === host);
    const per = (family: Family): Availability => {
      const fam = pools.filter((x) => parsePrefix(x.cidr).family === family);
      const inFam = (cidr: string) => fam.find((x) => prefixContainsIP(parsePrefix(x.cidr), parsePrefix(cidr).ip));
      const free = mine.filter((b) => inFam(b.cidr)).reduce((n, b) => n + b.free, 0);
      const underLimit = config.maxBlocksPerHost === 0 || mine.length < config.maxBlocksPerHost;
      const canClaim =
        config.autoAllocateBlocks && underLimit && fam.some((x) => subnetCount(parsePrefix(x.cidr), x.blockSize) > blocks.filter((b) => b.pool === x.name).length);
      const borrowable =
        h.os === 'windows' || config.strictAffinity
          ? 0
          : blocks.filter((b) => b.affinity !== host && b.borrowable && inFam(b.cidr)).reduce((n, b) => n + b.free, 0);
      return { free, canClaim, borrowable, pools: fam.map((x) => x.name) };
    };
    return { host, v4: per(4), v6: per(6) };
  };

  return {
    'ipam.assign': assign,
    'ipam.release': release,
    'ipam.check': check,
    'ipam.handles': handles,
    'ipam.gateway': gateway,
    'ipam.available': available,
  };
}
