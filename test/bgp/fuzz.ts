// The BGP fuzzing campaign: `npm run fuzz:bgp -- [--count 1000000] [--seed 1] [--resets 50] [--decoder-only]
// | --live-only] [--sample-every 100000]`.
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
  let secs = 0;
  let bad = 0;
  // --live-only: the live session alone (the heap plateau run: its samples are the speaker's, not the decoder
  // campaign's garbage).
  if (!process.argv.includes('--live-only')) {
    const rep = fuzz(n, seed, (done) => process.stderr.write(`${done} inputs\r`));
    secs = (performance.now() - t0) / 1000;
    process.stderr.write('\n');
    bad = rep.uncaught + rep.internal + rep.reencodeError + rep.reencodeMismatch;
    for (const e of rep.examples) console.error(e);
    console.log(JSON.stringify({ fuzz: 'bgp-codec', seed, seconds: Number(secs.toFixed(1)), ...rep, examples: rep.examples.length }));
    if (process.argv.includes('--decoder-only')) {
      process.exitCode = bad === 0 ? 0 : 1;
      return;
    }
  }
  t0 = performance.now();
  const live = await fuzzLive(n, seed, { maxResets: arg('resets', 50), sampleEvery: arg('sample-every', 100_000), onProgress: (d) => process.stderr.write(`${d} live\r`) });
  secs = (performance.now() - t0) / 1000;
  process.stderr.write('\n');
  for (const e of live.examples) console.error(e);
  const heap = heapPlateau(live.heapSamplesMB);
  console.log(JSON.stringify({ fuzz: 'bgp-live-session', seed, seconds: Number(secs.toFixed(1)), ...live, examples: live.examples.length, heap }));
  process.exitCode = bad + live.wrongNotification + live.unexpectedDown + live.bystanderFlaps === 0 ? 0 : 1;
}
void main();

/**
 * The heap samples summed up. The per-session AS-path cache fills and is emptied at its cap (aspaths.ts), so a
 * bounded heap is a sawtooth, not a line: `floorsMB` are the first sample and each one right after a drop (what
 * is held for good: mostly the RIB's routes and their attributes), `peaksMB` the sample before each drop. Also
 * the least-squares slope of the last quarter (MB per sample) and the peaks of each half.
 */
function heapPlateau(samples: number[]): Record<string, unknown> | null {
  if (samples.length < 8) return null;
  const q = samples.slice(Math.floor(samples.length * 0.75));
  const mx = (q.length - 1) / 2;
  const my = q.reduce((a, b) => a + b, 0) / q.length;
  let num = 0;
  let den = 0;
  q.forEach((y, x) => {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  });
  const floorsMB = [samples[0]];
  const peaksMB: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    if (samples[i] < samples[i - 1]) {
      peaksMB.push(samples[i - 1]);
      floorsMB.push(samples[i]);
    }
  }
  const half = Math.floor(samples.length / 2);
  return {
    flushes: peaksMB.length,
    floorsMB,
    peaksMB,
    lastQuarterSlopeMBPerSample: Number((num / den).toFixed(3)),
    peakFirstHalfMB: Math.max(...samples.slice(0, half)),
    peakSecondHalfMB: Math.max(...samples.slice(half)),
  };
}
