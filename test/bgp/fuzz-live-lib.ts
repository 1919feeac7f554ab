// Live-session fuzzing: mutated messages (the decoder fuzzer's mutations of generated UPDATEs, OPENs, ...) are
// written into an Established session of a real Speaker over TCP, next to a bystander session that must never
// notice. Each message is first classified by the decoder: the ones a session survives (ok, attribute discard,
// treat-as-withdraw, KEEPALIVE, ROUTE-REFRESH) go in batches and the session must stay Established and count them
// all; a sample of the session-ending ones is sent one at a time and must bring back exactly the NOTIFICATION the
// decoder named, after which the fuzzed peer is re-added (a fresh FSM, so damping does not slow the run).
// Heap use is sampled to show it stays bounded.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Speaker } from '../../src/bgp/speaker.ts';
import type { SpeakerConfig, SpeakerPeerConfig } from '../../src/bgp/speaker-config.ts';
import { decodeMessage, type DecodeOptions } from '../../src/bgp/codec/index.ts';
import { mulberry32 } from '../../src/rib/tablegen.ts';
import { corpus, mutate } from './codec-fuzz-lib.ts';
import { RawPeer, defaultCaps, freePort, waitFor } from './raw-peer.ts';

export interface LiveFuzzReport {
  /** Mutated messages generated and classified. */
  generated: number;
  /** Written into the live session: survivable ones, and session-ending ones. */
  sentSurvivable: number;
  sentResetting: number;
  /** Session-ending messages answered by a different NOTIFICATION than the decoder's, or none (must be 0). */
  wrongNotification: number;
  /** Times the session went down on a survivable message, or the bystander flapped (must be 0). */
  unexpectedDown: number;
  bystanderFlaps: number;
  outcomes: Record<string, number>;
  /** heapUsed in MB after the first batch and at the end, each after a full GC. */
  heapStartMB: number;
  heapEndMB: number;
  /** heapUsed in MB (after a GC when possible) every `sampleEvery` messages written: flat when memory is bounded. */
  heapSamplesMB: number[];
  /** Routes in the RIB at each heap sample: what the peer legitimately made us hold (part of the heap). */
  ribRoutesSamples: number[];
  ribRoutes: number;
  examples: string[];
}

const FUZZ = '127.0.0.2';
const BYSTANDER = '127.0.0.3';
const BATCH = 2000;

/** Write `n` mutated messages into a live session (see above). */
export async function fuzzLive(n: number, seed = 1, opts: { maxResets?: number; sampleEvery?: number; onProgress?: (done: number) => void } = {}): Promise<LiveFuzzReport> {
  const maxResets = opts.maxResets ?? 50;
  const sampleEvery = opts.sampleEvery ?? 100_000;
  let nextSample = sampleEvery;
  const rnd = mulberry32(seed);
  const seeds = corpus(seed, 300);
  const port = await freePort();
  const peerCfg = (address: string, asn: number): SpeakerPeerConfig => ({ address, asn, port, passive: true, families: ['ipv4', 'ipv6'], holdTime: 0 });
  const cfg: SpeakerConfig = { asn: 65001, routerId: '10.0.0.1', listen: { address: '127.0.0.1', port }, peers: [peerCfg(FUZZ, 65002), peerCfg(BYSTANDER, 65003)] };
  const s = new Speaker(cfg, { random: () => 0.5 });
  await s.start();
  const rep: LiveFuzzReport = {
    generated: 0, sentSurvivable: 0, sentResetting: 0, wrongNotification: 0, unexpectedDown: 0, bystanderFlaps: 0,
    outcomes: {}, heapStartMB: 0, heapEndMB: 0, heapSamplesMB: [], ribRoutesSamples: [], ribRoutes: 0, examples: [],
  };
  const status = (addr: string) => s.peers().find((p) => p.address === addr)!;
  const connect = async (addr: string, asn: number): Promise<RawPeer> => {
    const p = await RawPeer.connect(port, '127.0.0.1', addr);
    p.sendOpen({ asn, holdTime: 0, capabilities: defaultCaps(asn) });
    p.keepalive();
    await p.next('keepalive');
    await waitFor(() => status(addr).state === 'Established', `${addr} Established`);
    return p;
  };
  const bystander = await connect(BYSTANDER, 65003);
  let peer = await connect(FUZZ, 65002);
  // The session's decode options: 4-octet AS both sides, no extended messages, eBGP.
  const dopts: DecodeOptions = { fourOctetAs: true, extendedMessage: false, external: true };
  let batch: Buffer[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const want = status(FUZZ).messages.received + batch.length;
    peer.send(Buffer.concat(batch));
    rep.sentSurvivable += batch.length;
    batch = [];
    await waitFor(() => status(FUZZ).messages.received >= want || status(FUZZ).state !== 'Established', 'batch processed', 30_000, 5);
    // The raw peers keep every message they receive (the bystander gets each route exported): drop them, or the
    // heap samples would measure this harness rather than the speaker.
    bystander.received.length = 0;
    peer.received.length = 0;
    if (rep.sentSurvivable >= nextSample) {
      nextSample += sampleEvery;
      fullGc();
      rep.heapSamplesMB.push(heapMB());
      rep.ribRoutesSamples.push(s.rib.size);
    }
    if (status(FUZZ).state !== 'Established') {
      rep.unexpectedDown++;
      if (rep.examples.length < 10) rep.examples.push(`session went down on a survivable batch: ${status(FUZZ).lastError}`);
      peer = await reAdd();
    }
  };
  const reAdd = async (): Promise<RawPeer> => {
    peer.close();
    await s.reconfigure({ ...cfg, peers: [cfg.peers[1]] });
    await s.reconfigure(cfg);
    return connect(FUZZ, 65002);
  };
  // n counts messages written into the session (the decoder sees more: the session-ending ones not sent).
  for (let i = 0; rep.sentSurvivable + rep.sentResetting + batch.length < n; i++) {
    const bytes = mutate(seeds[Math.floor(rnd() * seeds.length)], seeds, rnd);
    // On a stream the length field decides where a message ends: keep it true, or the peer would see another cut.
    if (bytes.length < 19 || bytes.length > 4096) continue;
    bytes.writeUInt16BE(bytes.length, 16);
    rep.generated++;
    const r = decodeMessage(bytes, dopts);
    const type = bytes.length > 18 ? bytes[18] : 0;
    // OPEN in Established is an FSM error and NOTIFICATION ends the session: both are session-ending too.
    const ends = r.action === 'notification' || type === 1 || type === 3;
    const kind = r.action === 'notification' ? `notification ${r.code}/${r.subcode}` : r.action === 'ok' ? `ok ${r.message.type}` : r.action;
    rep.outcomes[kind] = (rep.outcomes[kind] ?? 0) + 1;
    if (!ends) {
      batch.push(bytes);
      if (batch.length >= BATCH) await flush();
    } else if (rep.sentResetting < maxResets && r.action === 'notification' && r.msgType === 2) {
      // A malformed UPDATE: alone on the wire, it must bring back the decoder's NOTIFICATION (the framer may
      // catch a bad header first: then the header error the framer reports).
      await flush();
      rep.sentResetting++;
      peer.send(bytes);
      let got: { code: number; subcode: number } | null = null;
      try {
        got = await peer.notification(10_000);
      } catch {
        got = null;
      }
      if (!got || got.code !== r.code || got.subcode !== r.subcode) {
        rep.wrongNotification++;
        if (rep.examples.length < 10) rep.examples.push(`expected ${r.code}/${r.subcode}, got ${got ? `${got.code}/${got.subcode}` : 'none'} for ${bytes.toString('hex')}`);
      }
      peer = await reAdd();
    }
    if (i === BATCH) {
      fullGc();
      rep.heapStartMB = heapMB();
    }
    if (opts.onProgress && (i + 1) % 50_000 === 0) opts.onProgress(rep.sentSurvivable);
  }
  await flush();
  rep.bystanderFlaps = status(BYSTANDER).flaps + (status(BYSTANDER).state === 'Established' ? 0 : 1);
  rep.ribRoutes = s.rib.size;
  fullGc();
  rep.heapEndMB = heapMB();
  if (rep.heapStartMB === 0) rep.heapStartMB = rep.heapEndMB;
  peer.close();
  bystander.close();
  await s.stop({ graceful: false });
  return rep;
}

function heapMB(): number {
  return Math.round((process.memoryUsage().heapUsed / 1048576) * 10) / 10;
}

let gcFn: (() => void) | undefined;
/** A full GC, with or without --expose-gc (tests run without it): the flag can be set at run time for a new context. */
function fullGc(): void {
  if (!gcFn) {
    gcFn = (globalThis as { gc?: () => void }).gc;
    if (!gcFn) {
      setFlagsFromString('--expose-gc');
      gcFn = runInNewContext('gc') as () => void;
    }
  }
  gcFn();
}
