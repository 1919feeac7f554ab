// Long mutation-fuzzing run of the BGP codec: `npm run fuzz:bgp -- [--n 100000] [--seed 1]`.
// Prints progress and a final JSON line with the count per outcome; exits 1 if anything escaped or broke.
import { fuzz } from './codec-fuzz-lib.ts';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}

const n = arg('n', 100_000);
const seed = arg('seed', 1);
const t0 = performance.now();
const rep = fuzz(n, seed, (done) => process.stderr.write(`${done} inputs\r`));
const secs = (performance.now() - t0) / 1000;
process.stderr.write('\n');
const bad = rep.uncaught + rep.internal + rep.reencodeError + rep.reencodeMismatch;
for (const e of rep.examples) console.error(e);
console.log(JSON.stringify({ fuzz: 'bgp-codec', seed, seconds: Number(secs.toFixed(1)), ...rep, examples: rep.examples.length }));
process.exitCode = bad === 0 ? 0 : 1;
