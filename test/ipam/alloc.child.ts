// Child process for the concurrency and crash tests: allocates for one host against a store directory and prints
// a line for every acknowledged allocation ("ACK <handle> <ip>"), every release started ("DEL <handle>") and
// every release acknowledged ("REL <handle>").
// argv: <dir> <host> <count> [inFlight] [releaseEvery]; env ALLOC_LAYOUT=calico: Calico's layout.
import { Ipam } from '../../src/ipam/ipam.ts';
import { calicoLayout } from '../../src/ipam/calico/layout.ts';
import { openFileStore } from '../../src/store/file.ts';

const [dir, host, countText, inFlightText = '1', releaseEveryText = '0'] = process.argv.slice(2);
const count = Number(countText);
const inFlight = Number(inFlightText);
const releaseEvery = Number(releaseEveryText);
const store = await openFileStore(dir);
const ipam = new Ipam(store, process.env.ALLOC_LAYOUT === 'calico' ? { layout: calicoLayout() } : {});
const tag = `${host}-${process.pid}`;
let next = 0;
const acked: string[] = [];
const out = (line: string) => process.stdout.write(line + '\n');

async function worker(): Promise<void> {
  while (next < count) {
    const i = next++;
    const handle = `${tag}-${i}`;
    const r = await ipam.autoAssign({ host, num4: 1, handle });
    for (const a of r.ipv4) out(`ACK ${handle} ${a.ip}`);
    if (r.ipv4.length) acked.push(handle);
    if (releaseEvery && i % releaseEvery === releaseEvery - 1 && acked.length > 1) {
      const victim = acked.splice(0, 1)[0];
      out(`DEL ${victim}`); // a release in flight when killed may or may not have happened
      await ipam.releaseByHandle(victim);
      out(`REL ${victim}`);
    }
  }
}
await Promise.all(Array.from({ length: inFlight }, worker));
await store.close();
out('DONE');
