// Calico's IPAM v2 JSON: lossless parse/serialize, byte-for-byte round trips of calico-node's records, and
// round-trip properties of the typed codecs.
import t from 'tap';
import fc from 'fast-check';
import { JsonNumber, parseJson, stringifyJson, type JsonValue } from '../../src/calico/ipam-json.ts';
import { calicoKeys } from '../../src/calico/keys.ts';
import {
  blockProblems,
  decodeAffinity,
  decodeBlock,
  decodeHandle,
  decodeIpamConfig,
  encodeAffinity,
  encodeBlock,
  encodeHandle,
  encodeIpamConfig,
  type CalicoBlock,
} from '../../src/calico/ipam-model.ts';
import { calicoCluster, linuxBlockA, linuxBlockB, SEQ_A, windowsBlock } from '../ipam/calico-fixtures.ts';

function plain(v: JsonValue): unknown {
  if (v instanceof JsonNumber) return Number(v.text);
  if (Array.isArray(v)) return v.map(plain);
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [k, plain(x)]));
  return v;
}

t.test('parseJson reads what JSON.parse reads, numbers kept as their literal', async (t) => {
  fc.assert(
    fc.property(fc.json(), (text) => {
      const v = parseJson(text);
      t.same(plain(v), JSON.parse(text));
      // serialize and parse again: same value
      t.same(plain(parseJson(stringifyJson(v))), JSON.parse(text));
    }),
    { numRuns: 300 },
  );
  const big = parseJson('{"n":1795600000123456789}') as Map<string, JsonValue>;
  t.equal((big.get('n') as JsonNumber).text, '1795600000123456789');
  t.not(String(JSON.parse('1795600000123456789')), '1795600000123456789', 'a JS number would have rounded it');
  for (const bad of ['{', '{"a":1,"a":2}', '[1,]', '01', '"\\x"', '{"a":1} x', 'nul']) t.throws(() => parseJson(bad), { name: 'JsonSyntaxError' }, bad);
});

t.test('strings are escaped as Go writes them', async (t) => {
  t.equal(stringifyJson('a<b>&c\u2028"\\\n\t\u0001\b\f'), '"a\\u003cb\\u003e\\u0026c\\u2028\\"\\\\\\n\\t\\u0001\\b\\f"');
  fc.assert(fc.property(fc.string({ unit: 'grapheme' }), (s) => t.equal(parseJson(stringifyJson(s)), s)), { numRuns: 200 });
});

t.test('calico-node records round-trip byte for byte', async (t) => {
  for (const kv of [linuxBlockA(), linuxBlockB(), windowsBlock()]) {
    const b = decodeBlock(kv.key, kv.value);
    t.equal(encodeBlock(b), kv.value, kv.key);
    t.same(blockProblems(b), [], `${kv.key} is consistent`);
  }
  const a = decodeBlock(linuxBlockA().key, linuxBlockA().value);
  t.equal(a.sequenceNumber, BigInt(SEQ_A) + 2n, '19-digit sequence number exact');
  t.equal(a.sequenceNumberForAllocation!.get('2'), BigInt(SEQ_A) + 1n);
  const b = decodeBlock(linuxBlockB().key, linuxBlockB().value);
  t.same(b.unknown.map(([k]) => k), ['futureField'], 'unknown block field kept');
  t.same(b.attributes[0].unknown.map(([k]) => k), ['futureAttr'], 'unknown attribute field kept');
  for (const kv of calicoCluster(true)) {
    if (kv.key.startsWith(calicoKeys.allHostAffinities)) {
      const d = decodeAffinity(kv.key, kv.value);
      t.equal(encodeAffinity(d.state), kv.value);
      t.equal(d.host.length > 0, true);
    } else if (kv.key.startsWith(calicoKeys.handles)) t.equal(encodeHandle(decodeHandle(kv.key, kv.value).block), kv.value);
    else if (kv.key === calicoKeys.config) t.equal(encodeIpamConfig(decodeIpamConfig(kv.key, kv.value)), kv.value);
  }
});

t.test('IPAM config: snake_case and camelCase, omitted when empty', async (t) => {
  const k = calicoKeys.config;
  t.equal(decodeIpamConfig(k, '{"strict_affinity":true}').autoAllocateBlocks, false, 'an existing config without auto_allocate_blocks means false');
  const c = decodeIpamConfig(k, '{"strict_affinity":true,"auto_allocate_blocks":true,"maxBlocksPerHost":4,"ipCooldownSeconds":30}');
  t.same([c.strictAffinity, c.autoAllocateBlocks, c.maxBlocksPerHost, c.ipCooldownSeconds], [true, true, 4, 30]);
  t.equal(encodeIpamConfig({ ...c, strictAffinity: false, maxBlocksPerHost: 0 }), '{"auto_allocate_blocks":true,"ipCooldownSeconds":30}');
  t.equal(encodeIpamConfig({ ...c, autoAllocateBlocks: false, strictAffinity: false, maxBlocksPerHost: 0, ipCooldownSeconds: 0 }), '{}');
  t.throws(() => decodeIpamConfig(k, '{"strict_affinity":"yes"}'), /strict_affinity must be true or false/);
});

t.test('keys: only the first "/" of the CIDR becomes "-", ipv6 under ipv6', async (t) => {
  t.equal(calicoKeys.block('fd00:10::/122'), '/calico/ipam/v2/assignment/ipv6/block/fd00:10::-122');
  t.equal(calicoKeys.affinity('n1', '10.0.0.0/26'), '/calico/ipam/v2/host/n1/ipv4/block/10.0.0.0-26');
  t.equal(calicoKeys.handle('k8s-pod-network.x'), '/calico/ipam/v2/handle/k8s-pod-network.x');
  const v6 = decodeBlock('/calico/ipam/v2/assignment/ipv6/block/fd00:10::-126', '{"cidr":"fd00:10::/126","affinity":null,"allocations":[null,null,null,null],"unallocated":[0,1,2,3],"attributes":[],"sequenceNumber":0,"sequenceNumberForAllocation":null,"deleted":false}');
  t.equal(v6.cidr, 'fd00:10::/126');
  t.equal(v6.sequenceNumberForAllocation, null, 'nil map stays null');
});

t.test('bad input names the key and the field', async (t) => {
  const { key, value } = linuxBlockA();
  t.throws(() => decodeBlock(key, value.replace('"sequenceNumber":', '"sequenceNumber":-')), /sequenceNumber must be an unsigned 64-bit/);
  t.throws(() => decodeBlock(key, value.replace('"sequenceNumber":', '"sequenceNumber":"').replace(',"sequenceNumberForAllocation"', '","sequenceNumberForAllocation"')), /sequenceNumber must be/);
  t.throws(() => decodeBlock(key, value.replace('"allocations":[0,', '"allocations":[7,')), /allocations\[0\] = 7 is not an index/);
  t.throws(() => decodeBlock(key, value.replace('"allocations":[0,', '"allocations":[')), /allocations has 63 entries/);
  t.throws(() => decodeBlock(key, value.replace('10.244.0.0/26', '10.244.0.64/26')), /does not match the key/);
  t.throws(() => decodeBlock(key, value.slice(0, 40)), new RegExp(`${key}: not JSON`));
  t.throws(() => decodeBlock('/calico/ipam/v2/assignment/ipv4/block/10.244.0.1-26', value), /host bits set/);
  t.throws(() => decodeAffinity(calicoKeys.affinity('n', '10.0.0.0/26'), '{"state":"maybe"}'), /state must be pending, confirmed or pendingDeletion/);
  const disagree = decodeBlock(key, value.replace('"unallocated":[3,', '"unallocated":[2,3,'));
  t.same(blockProblems(disagree), ['ordinal 2 is both allocated and in unallocated']);
  const missing = decodeBlock(key, value.replace('"unallocated":[3,', '"unallocated":['));
  t.same(blockProblems(missing), ['ordinal 3 is neither allocated nor in unallocated']);
});

t.test('property: typed block -> JSON -> typed block is the identity, and JSON is stable', async (t) => {
  const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
  const smap = fc.option(fc.dictionary(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 }), { minKeys: 1, maxKeys: 3 }), { nil: null });
  const attr = fc.record({
    handleId: fc.option(fc.string({ maxLength: 12 }), { nil: null }),
    secondary: smap,
    alternateOwnerAttrs: smap,
    releasedAt: fc.option(fc.constantFrom('2026-11-25T10:00:00Z', '2026-01-01T00:00:00Z'), { nil: null }),
  });
  const arb = fc.record({ attrs: fc.array(attr, { maxLength: 4 }), picks: fc.array(fc.nat(), { minLength: 16, maxLength: 16 }), seq: u64, sfa: fc.option(fc.dictionary(fc.nat(15).map(String), u64), { nil: null }), aff: fc.option(fc.constantFrom('host:a', 'virtual:vm1'), { nil: null }), deleted: fc.boolean() });
  fc.assert(
    fc.property(arb, (r) => {
      const toMap = (o: Record<string, string> | null) => (o ? new Map(Object.entries(o).sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0))) : null);
      const attributes = r.attrs.map((a) => ({ ...a, secondary: toMap(a.secondary), alternateOwnerAttrs: toMap(a.alternateOwnerAttrs), unknown: [] }));
      const allocations = r.picks.map((p) => (attributes.length && p % 3 === 0 ? p % attributes.length : null));
      const block: CalicoBlock = {
        cidr: '10.1.2.16/28',
        affinity: r.aff,
        affinityClaimTime: null,
        allocations,
        unallocated: allocations.flatMap((a, o) => (a === null ? [o] : [])),
        attributes,
        sequenceNumber: r.seq,
        sequenceNumberForAllocation: r.sfa ? new Map(Object.entries(r.sfa).sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0))) : null,
        deleted: r.deleted,
        unknown: [],
      };
      const text = encodeBlock(block);
      const back = decodeBlock(calicoKeys.block(block.cidr), text);
      // Go omits empty maps (omitempty): an empty secondary reads back as absent
      const norm = (b: CalicoBlock) => ({ ...b, attributes: b.attributes.map((a) => ({ ...a, secondary: a.secondary?.size ? a.secondary : null, alternateOwnerAttrs: a.alternateOwnerAttrs?.size ? a.alternateOwnerAttrs : null })) });
      t.same(norm(back), norm(block));
      t.equal(encodeBlock(back), text);
      t.same(blockProblems(back), []);
    }),
    { numRuns: 200 },
  );
});
