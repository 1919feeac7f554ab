// Child process for the etcd contention and fault tests: allocates for one host through IPAM on an etcd store and
// prints one line per outcome, so the parent knows what was promised:
//   ACK <handle> <ip>        allocation acknowledged
//   ERR <handle> <message>   allocation failed with this error (nothing promised)
//   DEL <handle>             release started (a release in flight when killed may or may not have happened)
//   REL <handle>             release acknowledged
//   RERR <handle> <message>  release failed with this error (the address may still be held)
//   DONE <json stats>        finished; store statistics
// Store log lines (retries, resolved outcomes) go to stderr prefixed with the host.
// argv: <etcd://...> <host> <count> [inFlight] [releaseEvery]
import { Ipam } from '../../src/ipam/ipam.ts';
import { openStore } from '../../src/store/open.ts';
import type { EtcdStore } from '../../src/store/etcd.ts';

const [spec, host, countText, inFlightText = '1', releaseEveryText = '0'] = process.argv.slice(2);
const count = Number(countText);
const inFlight = Number(inFlightText);
const releaseEvery = Number(releaseEveryText);
const store = (await openStore(spec, { log: (l) => process.stderr.write(`[${host}] ${l}\n`) })) as EtcdStore;
const ipam = new Ipam(store);
const tag = `${host}-${process.pid}`;
let next = 0;
const acked: string[] = [];
const out = (line: string) => process.stdout.write(line + '\n');
const oneLine = (e: unknown) => `${(e as Error)?.name ?? 'Error'}: ${(e as Error)?.message ?? String(e)}`.replace(/\s+/g, ' ');

async function worker(): Promise<void> {
  while (next < count) {
    const i = next++;
    const handle = `${tag}-${i}`;
    try {
      const r = await ipam.autoAssign({ host, num4: 1, handle });
      if (r.ipv4.length) {
        for (const a of r.ipv4) out(`ACK ${handle} ${a.ip}`);
        acked.push(handle);
      } else out(`ERR ${handle} exhausted: ${r.messages.join('; ')}`);
    } catch (e) {
      out(`ERR ${handle} ${oneLine(e)}`);
    }
    if (releaseEvery && i % releaseEvery === releaseEvery - 1 && acked.length > 1) {
      const victim = acked.splice(0, 1)[0];
      out(`DEL ${victim}`);
      try {
        await ipam.releaseByHandle(victim);
        out(`REL ${victim}`);
      } catch (e) {
        out(`RERR ${victim} ${oneLine(e)}`);
      }
    }
  }
}
await Promise.all(Array.from({ length: inFlight }, worker));
out(`DONE ${JSON.stringify(store.stats())}`);
await store.close();
