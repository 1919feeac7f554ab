// A BFD speaker for the TTL test (test/interop/bfd-ttl.test.ts), run inside the peer's namespace: our BfdManager
// with one session to argv[2], sending with the TTL of argv[3], printing its session state as a JSON line on each
// change. Runs until killed.
import { BfdManager } from '../../src/bfd/manager.ts';

const [address, ttl] = [process.argv[2], Number(process.argv[3])];
const m = new BfdManager({ ttl, logger: { info() {}, warn: (w) => process.stderr.write(`${w}\n`) } });
m.on('state', (addr, st) => process.stdout.write(`${JSON.stringify({ address: addr, state: st.state })}\n`));
await m.configure([{ address, minRx: 300, minTx: 300, multiplier: 3 }]);
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
