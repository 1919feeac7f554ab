// The decoder's "same attributes as the last UPDATE" path (DecodeScratch.sameAttrs/remember): an UPDATE whose
// path attribute bytes and session options equal those of the last clean classic-NLRI UPDATE reuses its record.
// Oracle: decoding every message on its own, without a scratch.
import t from 'tap';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { type PathAttrs } from '../../src/rib/attrs.ts';
import type { PrefixList } from '../../src/rib/prefixlist.ts';
import { DecodeScratch, decodeMessage, encodeUpdate, type DecodeOptions, type DecodeResult, type UpdateMessage } from '../../src/bgp/codec/index.ts';
import { AS_PATH, NEXT_HOP, NLRI, ORIGIN, prefix4, update, updateInput } from './codec-helpers.ts';

const list = (l: PrefixList | undefined) => (l ? Array.from({ length: l.count }, (_, i) => l.format(i)) : null);
const attrsJson = (a: PathAttrs | null) => JSON.stringify(a, (_k, v: unknown) => (v instanceof Uint8Array ? [...v] : v));

/** Everything a decode says, as one string (taken at once: the scratch's lists are reused by the next decode). */
function canon(r: DecodeResult): string {
  if (r.action === 'notification') return JSON.stringify([r.action, r.code, r.subcode, r.reason, [...r.data]]);
  const m = r.message as UpdateMessage;
  return JSON.stringify([
    r.action, 'problems' in r ? r.problems.map((p) => [p.attrType, p.action, p.reason]) : [], list(m.withdrawn), list(m.nlri),
    list(m.mpReach?.nlri), list(m.mpUnreach?.withdrawn), attrsJson(m.attrs), m.wireAttrs,
  ]);
}

// A few option sets a session can have (eBGP/iBGP, 2- or 4-octet AS numbers).
const OPTS: DecodeOptions[] = [
  { fourOctetAs: true }, { fourOctetAs: true, external: true }, { fourOctetAs: false }, { fourOctetAs: false, external: true },
];

for (const borrow of [false, true]) t.test(`property: a stream of UPDATEs decodes through one long-lived scratch exactly as each on its own${borrow ? ' (borrowInput: the last bytes by reference, as sessions do)' : ''}`, async (t) => {
  const scratch = new DecodeScratch(); // across all runs, as the daemon's shared one
  scratch.borrowInput = borrow;
  let reused = 0;
  let messages = 0;
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.constantFrom(0, 1, 2, 3), updateInput(true), updateInput(false)), { minLength: 1, maxLength: 2 }),
      fc.array(
        fc.record({
          // Mostly the options the set was encoded for (-1), sometimes another session's.
          pick: fc.nat(), opt: fc.oneof({ weight: 4, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.constantFrom(0, 1, 2, 3) }), nlri: fc.array(prefix4, { minLength: 0, maxLength: 4 }),
          flip: fc.option(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), { nil: null, freq: 4 }),
        }),
        { minLength: 1, maxLength: 12 },
      ),
      (sets, stream) => {
        for (const s of stream) {
          const [encOpt, u4, u2] = sets[s.pick % sets.length];
          const eo = OPTS[encOpt];
          const u = eo.fourOctetAs ? u4 : u2;
          // The same attributes with other prefixes (the pattern the fast path is for), sometimes under other options.
          const base = u.attrs && !('mpReach' in u && u.mpReach) ? { ...u, nlri: s.nlri.length ? s.nlri : u.nlri } : u;
          const buf = Buffer.from(encodeUpdate(base, eo));
          if (s.flip) buf[19 + (s.flip[0] % (buf.length - 19))] ^= s.flip[1]; // a damaged one now and then
          const opts = s.opt < 0 ? eo : OPTS[s.opt];
          const want = canon(decodeMessage(buf, opts));
          const before = scratch.lastAttrs;
          const r = decodeMessage(buf, { ...opts, scratch });
          const got = canon(r);
          assert.equal(got, want);
          if (r.action === 'ok' && r.message.type === 'update' && r.message.attrs !== null && r.message.attrs === before) reused++;
          messages++;
        }
      },
    ),
    { numRuns: 400 },
  );
  t.ok(messages > 400, `${messages} UPDATEs decoded both ways`);
  t.ok(reused > 0, `${reused} decodes reused the last record`);
});

t.test('the last record is reused only for the same bytes under the same options', async (t) => {
  const scratch = new DecodeScratch();
  const eor = decodeMessage(encodeUpdate({ attrs: null, withdrawn: [] }), { scratch }); // an End-of-RIB remembers nothing
  t.equal(eor.action, 'ok');
  t.equal(scratch.lastAttrs, null);
  const u = fc.sample(updateInput(true).filter((x) => x.attrs !== null && Array.isArray(x.nlri) && x.nlri.length > 0), { numRuns: 1, seed: 7 })[0];
  const one = encodeUpdate(u, { fourOctetAs: true });
  const a = decodeMessage(one, { fourOctetAs: true, scratch });
  const b = decodeMessage(one, { fourOctetAs: true, scratch });
  const c = decodeMessage(one, { fourOctetAs: true, external: true, scratch });
  t.ok(a.action === 'ok' && b.action === 'ok');
  const am = (a as { message: UpdateMessage }).message;
  const bm = (b as { message: UpdateMessage }).message;
  t.equal(bm.attrs, am.attrs, 'same bytes, same options: the same record');
  t.not((c as { message: UpdateMessage }).message.attrs, am.attrs, 'another session kind: decoded afresh');
});

t.test("a clean UPDATE comes back in the scratch's message; one with problems in a message of its own", async (t) => {
  const scratch = new DecodeScratch();
  const opts = { fourOctetAs: true, scratch };
  const clean = update({ attrs: [ORIGIN, AS_PATH, NEXT_HOP], nlri: NLRI });
  const a = decodeMessage(clean, opts);
  t.equal(a, scratch.ok, 'the result is the scratch one');
  t.equal(a.action === 'ok' && a.message, scratch.update, 'and so is the message');
  t.same(list((a as { message: UpdateMessage }).message.nlri), ['192.168.1.0/24', '10.1.0.0/16']);
  // A second clean UPDATE refills the same objects: the contract is "consume before the next decode".
  const b = decodeMessage(update({ attrs: [ORIGIN, AS_PATH, NEXT_HOP], nlri: '18 c0a802' }), opts);
  t.equal(b, a, 'refilled, not made afresh');
  t.same(list(scratch.update.nlri), ['192.168.2.0/24']);
  // A withdrawal-only UPDATE: no attributes.
  const w = decodeMessage(update({ withdrawn: '18 c0a801' }), opts);
  t.equal(w, scratch.ok);
  t.equal(scratch.update.attrs, null);
  t.same(list(scratch.update.withdrawn), ['192.168.1.0/24']);
  // RFC 7606 problems (a missing NEXT_HOP: treat-as-withdraw) keep a result of their own, which the next decode
  // does not touch.
  const bad = decodeMessage(update({ attrs: [ORIGIN, AS_PATH], nlri: NLRI }), opts);
  t.equal(bad.action, 'treat-as-withdraw');
  t.not(bad, scratch.ok);
  const badMessage = (bad as { message: UpdateMessage }).message;
  t.not(badMessage, scratch.update);
  decodeMessage(clean, opts);
  t.equal(badMessage.attrs, null, 'the earlier result is unchanged by the next decode');
  t.equal(scratch.update.attrs?.nextHop?.toString(), '10.0.0.1');
});
