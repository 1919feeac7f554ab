import t from 'tap';
import { fuzzLive } from './fuzz-live-lib.ts';

// The short live-session form for every `npm test`; `npm run fuzz:bgp -- --count 1000000` is the campaign.
t.test('live-session fuzzing: 4,000 mutated messages into an Established session, a bystander undisturbed', async (t) => {
  const rep = await fuzzLive(4000, 20261125, { maxResets: 5 });
  t.equal(rep.sentSurvivable + rep.sentResetting, 4000, 'all written into the session');
  t.equal(rep.sentResetting, 5, 'five session-ending UPDATEs sent, one at a time');
  t.equal(rep.wrongNotification, 0, 'each answered by the NOTIFICATION the decoder names');
  t.equal(rep.unexpectedDown, 0, 'the session survived every survivable message');
  t.equal(rep.bystanderFlaps, 0, 'the other session never noticed');
  for (const k of ['ok update', 'treat-as-withdraw', 'attribute-discard']) t.ok((rep.outcomes[k] ?? 0) > 0, `${k} reached`);
  t.comment(JSON.stringify({ outcomes: rep.outcomes, heapStartMB: rep.heapStartMB, heapEndMB: rep.heapEndMB }));
});

// The short form of the heap plateau run (`npm run fuzz:bgp -- --live-only --count 2000000 --sample-every 50000`,
// BENCHMARKS.md): heap after a full GC, start against end, is a memory bound, not a timing. Expected growth: the
// AS-path cache (~0.09 MB per 1,000 fuzzed messages until its cap) and the routes the fuzzer made us hold (~2 KB
// each with their long attributes); a session that kept each message (or each raw path) would exceed it.
t.test('live-session fuzzing: heap after GC stays bounded over 20,000 messages', async (t) => {
  const rep = await fuzzLive(20_000, 7, { maxResets: 0, sampleEvery: 5000 });
  t.equal(rep.unexpectedDown + rep.bystanderFlaps, 0, 'sessions undisturbed');
  t.equal(rep.heapSamplesMB.length, 4, 'four heap samples, each after a full GC');
  const grown = rep.heapEndMB - rep.heapStartMB;
  const bound = 4 + (rep.ribRoutes * 2.5) / 1024;
  t.ok(grown <= bound, `heap after GC grew ${grown.toFixed(1)} MB over 20,000 messages (bound ${bound.toFixed(1)} MB for ${rep.ribRoutes} routes held): ${JSON.stringify(rep.heapSamplesMB)}`);
});
