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
