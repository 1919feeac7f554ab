// What the 100-peer shapes (bench/bgp-peers.ts, bench/bgp-idle-sessions.ts) share: the sender, one BIRD with 100
// `protocol bgp` per receiver, each from its own source address (100 addresses on the sender's veth) with its own AS
// and router ID, each exporting its own static protocol of N /24s, towards 100 addresses of the receiver; and the run
// around a measurement (links, sender, final JSON line).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { cleanupLeftovers, type Link } from '../../test/kit/interop/netns.ts';
import { benchJson, buildDist, linksFor, type BgpBenchValues } from './bgp-bench.ts';
import { RECEIVER_AS, type Kind, type PeerSpec } from './bgp-receivers.ts';
import { birdc, startBird, type Sender } from './bird-sender.ts';
import { finish, now, type tempDirs } from './daemon-bench.ts';

export const BGPERF_PEERS = 100;

/** Sender address i (1..100) of link k's bgperf subnet, and the receiver address it talks to. */
const bgperfNet = (k: number) => `10.${100 + k}`;
const bgperfSender = (k: number, i: number) => `${bgperfNet(k)}.0.${i}`;
const bgperfReceiver = (k: number, i: number) => `${bgperfNet(k)}.1.${i}`;
const bgperfAsn = (i: number) => 65100 + i;

async function addBgperfAddresses(link: Link, k: number): Promise<void> {
  // One /16 on both ends, so every sender address is on a connected network of the receiver (direct eBGP).
  const batch = (ifname: string, addr: (i: number) => string) =>
    Array.from({ length: BGPERF_PEERS }, (_, j) => `addr add ${addr(j + 1)}/16 dev ${ifname}`).join('\n') + '\n';
  for (const [side, addr] of [[link.local, (i: number) => bgperfSender(k, i)], [link.peer, (i: number) => bgperfReceiver(k, i)]] as const) {
    await new Promise<void>((res, rej) => {
      const p = spawn('ip', ['-n', side.ns.name, '-batch', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
      let err = '';
      p.stderr.on('data', (d: Buffer) => (err += d.toString()));
      p.on('exit', (c) => (c === 0 ? res() : rej(new Error(`ip -batch: ${err}`))));
      p.stdin.end(batch(side.ifname, addr));
    });
  }
}

function bgperfSenderConfig(links: Map<Kind, Link>, dir: string, routerId: string, prefixes: number): string {
  const out: string[] = [
    `log "${join(dir, 'bird.log')}" { warning, error, fatal };`,
    'timeformat protocol iso long ms;',
    `router id ${routerId};`,
    'protocol device { scan time 10; }',
  ];
  for (let i = 1; i <= BGPERF_PEERS; i++) {
    out.push(`protocol static src${i} {`, '  ipv4;');
    for (let j = 0; j < prefixes; j++) out.push(`  route 20.${i}.${j}.0/24 blackhole;`);
    out.push('}');
  }
  let k = 0;
  for (const kind of links.keys()) {
    k++;
    for (let i = 1; i <= BGPERF_PEERS; i++) {
      out.push(`protocol bgp q${k}_${i} {`, '  disabled;',
        `  local ${bgperfSender(k, i)} as ${bgperfAsn(i)};`, `  router id ${bgperfSender(k, i)};`,
        `  neighbor ${bgperfReceiver(k, i)} as ${RECEIVER_AS};`,
        '  connect delay time 1;', '  connect retry time 2;', '  error wait time 1, 5;', '  hold time 240;',
        `  ipv4 { import none; export where proto = "src${i}"; };`, '}');
    }
    void kind;
  }
  return `${out.join('\n')}\n`;
}

/** The receiver's side of link k's sessions: one passive peer per sender address. */
export function bgperfPeers(k: number): PeerSpec[] {
  return Array.from({ length: BGPERF_PEERS }, (_, j) => ({ address: bgperfSender(k, j + 1), asn: bgperfAsn(j + 1), families: ['ipv4'] }));
}

/**
 * The sender for every link (link k's sessions are the protocols "qk_*", all disabled until `birdc enable`), with
 * `prefixes` /24s per peer, in the namespace the links share; resolves once BIRD has its static routes up.
 */
export async function startBgperfSender(links: Map<Kind, Link>, dir: string, prefixes: number, what: string): Promise<Sender> {
  let k = 0;
  for (const l of links.values()) await addBgperfAddresses(l, ++k);
  const first = links.values().next().value!;
  return startBird(first.local.ns, dir, bgperfSenderConfig(links, dir, first.local.v4, prefixes),
    async (ctl) => /src100\s+Static\s+master4\s+up/.test(await birdc(ctl, ['show', 'protocols'])), what);
}

/**
 * A 100-peer bench from start to end: links for the receivers, the sender (`prefixes` per peer), `measure` with
 * both, its result under `key` in the final JSON line; then finish (namespaces, daemons and temp dirs removed).
 */
export async function runBgperf(o: {
  bench: string;
  values: BgpBenchValues;
  receivers: Kind[];
  temps: ReturnType<typeof tempDirs>;
  prefixes: number;
  /** The sender's temp dir name and what it is called in errors. */
  senderDir: string;
  what: string;
  key: string;
  measure(sender: Sender, links: Map<Kind, Link>): Promise<unknown>;
}): Promise<never> {
  const json = benchJson(o.bench.replace(/^bench:/, ''), o.values);
  const started = now();
  let error: unknown = null;
  try {
    cleanupLeftovers();
    await buildDist(o.receivers, o.values);
    if (!o.receivers.length) throw new Error('nothing to measure: give --receivers');
    const links = await linksFor(o.receivers);
    const sender = await startBgperfSender(links, o.temps.make(o.senderDir), o.prefixes, o.what);
    json[o.key] = await o.measure(sender, links);
    sender.child.kill('SIGKILL');
  } catch (e) {
    error = e;
  }
  return finish(o.bench, json, started, error, o.temps, o.values.keep === true);
}
