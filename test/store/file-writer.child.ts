// Child process for the multi-process test: CAS-increments a shared counter N times (retrying on conflict) and
// puts one unique key per increment. Args: dir id n [optsJSON]. Prints "done <retries>" at the end.
import { openFileStore } from '../../src/store/file.ts';

const [dir, id, nArg, optsArg] = process.argv.slice(2);
const n = Number(nArg);
const store = await openFileStore(dir!, optsArg ? JSON.parse(optsArg) : {});
let retries = 0;
for (let i = 0; i < n; i++) {
  for (;;) {
    const kv = await store.get('counter');
    const next = String((kv ? Number(kv.value) : 0) + 1);
    const r = await store.txn(
      [{ key: 'counter', modRevision: kv ? kv.modRevision : 0 }],
      [
        { type: 'put', key: 'counter', value: next },
        { type: 'put', key: `unique/${id}/${i}`, value: `${id}:${i}:${next}` },
      ],
    );
    if (r.succeeded) break;
    retries++;
  }
}
await store.close();
console.log(`done ${retries}`);
