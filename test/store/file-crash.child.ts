// Child process for the crash test: after "go" on stdin, writes in a loop with several txns in flight and prints one line per
// acknowledged txn ("<i> <revision>"), until it is SIGKILLed. Txn i puts slot/<i % 50> = i, and every 10th also
// puts unique/<i> = v<i>, both under the key prefix given. Args: dir base prefix [optsJSON]; i counts up from base
// (the parent gives each run its own).
import { openFileStore } from '../../src/store/file.ts';

const [dir, baseArg, prefix, optsArg] = process.argv.slice(2);
const store = await openFileStore(dir!, optsArg ? JSON.parse(optsArg) : {});
let next = Number(baseArg);

async function worker(): Promise<never> {
  for (;;) {
    const i = next++;
    const ops = [{ type: 'put' as const, key: `${prefix}slot/${i % 50}`, value: String(i) }];
    if (i % 10 === 0) ops.push({ type: 'put', key: `${prefix}unique/${i}`, value: `v${i}` });
    const r = await store.txn([], ops);
    process.stdout.write(`${i} ${r.revision}\n`);
  }
}
// The parent starts the next run's processes early (startup is slow) and says "go" on stdin when it is time.
process.stdout.write('ready\n');
process.stdin.once('data', () => void Promise.all(Array.from({ length: 8 }, worker)));
