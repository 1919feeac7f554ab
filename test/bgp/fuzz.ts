// The BGP fuzzing campaign: `npm run fuzz:bgp -- [--count 1000000] [--seed 1] [--resets 50] [--decoder-only]`.
// 1. the decoder (and framer): --count mutated messages (codec-fuzz-lib.ts);
// 2. a live session: --count mutated messages written into an Established session of a Speaker, beside a
//    bystander session (fuzz-live-lib.ts).
// Prints progress and one final JSON line per part; exits 1 if anything escaped, broke or disturbed a session.
import { fuzz } from './codec-fuzz-lib.ts';
import { fuzzLive } from './fuzz-live-lib.ts';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}

async function main(): Promise<void> {
  const n = arg('count', arg('n', 100_000));
  const seed = arg('seed', 1);
  let t0 = performance.now();
  const rep = fuzz(n, seed, (done) => process.stderr.write(`${done} inputs\r`));
  let secs = (performance.now() - t0) / 1000;
  process.stderr.write('\n');
  const bad = rep.uncaught + rep.internal + rep.reencodeError + rep.reencodeMismatch;
  for (const e of rep.examples) console.error(e);
  console.log(JSON.stringify({ fuzz: 'bgp-codec', seed, seconds: Number(secs.toFixed(1)), ...rep, examples: rep.examples.length }));
  if (process.argv.includes('--decoder-only')) {
    process.exitCode = bad === 0 ? 0 : 1;
    return;
  }
  t0 = performance.now();
  const live = await fuzzLive(n, seed, { maxResets: arg('resets', 50), onProgress: (d) => process.stderr.write(`${d} live\r`) });
  secs = (performance.now() - t0) / 1000;
  process.stderr.write('\n');
  for (const e of live.examples) console.error(e);
  console.log(JSON.stringify({ fuzz: 'bgp-live-session', seed, seconds: Number(secs.toFixed(1)), ...live, examples: live.examples.length }));
  process.exitCode = bad + live.wrongNotification + live.unexpectedDown + live.bystanderFlaps === 0 ? 0 : 1;
}
void main();
