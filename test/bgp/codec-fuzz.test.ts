import t from 'tap';
import { fuzz } from './codec-fuzz-lib.ts';

// A short deterministic run for every `npm test`; `npm run fuzz:bgp` runs 100k+ (test/bgp/fuzz.ts).
t.test('mutation fuzzing: 2,000 mutated messages, no exception escapes the decoder', async (t) => {
  const rep = fuzz(2000, 20240601);
  t.equal(rep.inputs, 2000);
  t.equal(rep.uncaught, 0, 'no uncaught exception');
  t.equal(rep.internal, 0, 'no internal error converted to a NOTIFICATION');
  t.equal(rep.reencodeError, 0, 'every decoded message encodes again');
  t.equal(rep.reencodeMismatch, 0, 'and decodes to the same content');
  t.same(rep.examples, []);
  // Every outcome is reached, so the mutations get past the header checks.
  for (const a of ['ok', 'notification', 'treat-as-withdraw', 'attribute-discard']) t.ok((rep.outcomes[a] ?? 0) > 0, `${a} reached`);
  t.comment(JSON.stringify({ outcomes: rep.outcomes, framed: rep.framed, framerErrors: rep.framerErrors }));
});
