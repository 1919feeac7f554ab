// Our speakers on loopback addresses 127.0.0.N sharing one free port, stopped after each test: the setup the
// speaker-to-speaker tests share.
import type { Test } from 'tap';
import { Speaker } from '../../src/bgp/speaker.ts';
import type { SpeakerConfig, SpeakerOptions, SpeakerPeerConfig } from '../../src/bgp/speaker-config.ts';
import { freePort } from './raw-peer.ts';
import { describeAttrs } from '../../src/bgp/codec/json.ts';
import type { PathAttrs } from '../../src/rib/attrs.ts';

export interface Loopback {
  /** Config of speaker N (router ID 10.0.0.N, listening on 127.0.0.N). */
  cfgOf(n: number, asn: number, peers: SpeakerPeerConfig[], extra?: Partial<SpeakerConfig>): SpeakerConfig;
  /** A speaker made (and stopped after the test) from cfgOf. */
  mk(n: number, asn: number, peers: SpeakerPeerConfig[], extra?: Partial<SpeakerConfig>, opts?: SpeakerOptions): Speaker;
  /** The port every speaker listens on (known once the test's `before` ran). */
  port(): number;
  /** Peer config for speaker N. */
  peer(n: number, asn: number, extra?: Partial<SpeakerPeerConfig>): SpeakerPeerConfig;
}

export function loopbackSpeakers(t: Test): Loopback {
  let port = 0;
  const speakers: Speaker[] = [];
  t.before(async () => {
    port = await freePort();
  });
  t.afterEach(async () => {
    await Promise.all(speakers.splice(0).map((s) => s.stop({ graceful: false })));
  });
  const cfgOf: Loopback['cfgOf'] = (n, asn, peers, extra = {}) =>
    ({ asn, routerId: `10.0.0.${n}`, listen: { address: `127.0.0.${n}`, port }, peers, ...extra });
  return {
    cfgOf,
    mk(n, asn, peers, extra, opts = {}) {
      const s = new Speaker(cfgOf(n, asn, peers, extra), { random: () => 0.5, ...opts });
      speakers.push(s);
      return s;
    },
    port: () => port,
    peer: (n, asn, extra = {}) => ({ address: `127.0.0.${n}`, asn, port, connectRetry: 1, ...extra }),
  };
}

/** A route's standard then large communities as text ("aa:nn", "aa:nn:mm"), as /routes shows them. */
export function communitiesOf(a: PathAttrs): string[] {
  const d = describeAttrs(a, false);
  return [...(d.COMMUNITIES as string[] ?? []), ...(d.LARGE_COMMUNITY as string[] ?? [])];
}
