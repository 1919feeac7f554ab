// Records from the shared store are input: a writer to the shared store (etcd, or the embedded store's directory) writes records of our
// layout that the allocator cannot trust. Two nodes' daemons share a store; node A's block is replaced by a corrupt
// one of several kinds, and node B keeps serving its blocks (/ipam/*, /overview, the announcer's route view,
// `show ipam`, ipam.handles and release, which CNI GC uses), node A skips its block and allocates elsewhere, nothing
// is written over the corrupt record, and /warnings holds exactly one entry naming the key, however often it is
// rewritten; 10,000 corrupt keys leave the list at its bound. Against a real etcd and the embedded file store.
// Then properties: any JSON written as a block, affinity or handle either decodes into a record that round-trips or
// is refused with a message naming the key; the views never throw. And the warning list's own rules.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { pino } from 'pino';
import { parseConfig } from '../../src/config/config.ts';
import { Daemon } from '../../src/daemon/daemon.ts';
import { WarningLog, type WarningEntry, type WarningsView } from '../../src/daemon/warnings.ts';
import { ipcRequest, IpcError } from '../../src/ipc/client.ts';
import type { AssignReply, ReleaseReply } from '../../src/ipc/protocol.ts';
import { allocate, blockCounts, newBlock, release } from '../../src/ipam/block.ts';
import { IpamStore } from '../../src/ipam/datastore.ts';
import { Ipam } from '../../src/ipam/ipam.ts';
import { blockspeakerLayout, keys, RecordError } from '../../src/ipam/layout.ts';
import type { BlockRecord } from '../../src/ipam/types.ts';
import { validatePool } from '../../src/ipam/validate.ts';
import { formatIP, ipAt, parsePrefix } from '../../src/net/ip.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { getStatus } from '../kit/daemon.ts';
import { openStore } from '../../src/store/open.ts';
import type { Op, Store } from '../../src/store/types.ts';
import { waitFor } from '../kit/wait.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';

// ---- two daemons on one store -------------------------------------------------------------------------------

interface Node {
  name: string;
  d: Daemon;
  socket: string;
  /** Log lines (JSON) at warn and above. */
  logs: string[];
  get(path: string): Promise<{ status: number; body: any; text: string }>;
}

async function startNode(t: Test, dir: string, name: string, address: string, store: string): Promise<Node> {
  const file = join(dir, `${name}.yaml`);
  const socket = join(dir, `${name}.sock`);
  const text = `node: { name: ${name}, os: linux, bgp: { ipv4Address: ${address}/32 } }
ipam:
  store: ${JSON.stringify(store)}
  pools: [{ name: pods, cidr: 10.244.0.0/24, blockSize: 28 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:0" }
ipc: { path: ${JSON.stringify(socket)} }
`;
  writeFileSync(file, text);
  const logs: string[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void logs.push(line) });
  const d = new Daemon({ file, config: parseConfig(text, file), log, version: 'test' });
  await d.start();
  t.teardown(() => d.stop());
  const port = d.status.address()!.port;
  return {
    name, d, socket, logs,
    get: (path) => getStatus(port, path),
  };
}

const warningsOf = async (n: Node): Promise<WarningsView> => (await n.get('/warnings')).body as WarningsView;
const about = (w: WarningsView, key: string): WarningEntry[] => w.entries.filter((e) => e.key === key);

/** Corruptions of a good block's JSON, each with a phrase its warning must carry. */
function corruptions(good: string, otherCidr: string): { kind: string; value: (n: number) => string; says: RegExp }[] {
  const edit = (fn: (o: Record<string, unknown>) => void) => (n: number) => {
    const o = JSON.parse(good) as Record<string, unknown>;
    fn(o);
    o.rewrite = n; // every rewrite a different value (a newer version's field is allowed, so it changes nothing)
    return JSON.stringify(o);
  };
  return [
    { kind: 'no allocations', value: edit((o) => delete o.allocations), says: /allocations must be a list/ },
    { kind: 'allocations one short', value: edit((o) => (o.allocations as unknown[]).pop()), says: /allocations has 15 entries, a \/28 block has 16/ },
    { kind: 'a cidr that does not parse', value: edit((o) => (o.cidr = '10.244.0.999/28')), says: /cidr "10\.244\.0\.999\/28" is not a network prefix/ },
    { kind: "another block's cidr", value: edit((o) => (o.cidr = otherCidr)), says: /does not match the key's/ },
    {
      kind: 'an address both allocated and free',
      value: edit((o) => (o.unallocated as number[]).push((o.allocations as (number | null)[]).findIndex((a) => a !== null))),
      says: /ordinal \d+ is both allocated and free/,
    },
    { kind: 'an attribute index out of range', value: edit((o) => ((o.allocations as (number | null)[])[15] = 7)), says: /allocations\[15\] = 7 is not an index into attributes/ },
    { kind: 'not JSON', value: (n) => `{"cidr": "10.244.0.0/28", "allocations": [${n}`, says: /not JSON/ },
  ];
}

async function putMany(store: Store, kvs: [string, string | null][]): Promise<void> {
  for (let i = 0; i < kvs.length; i += 100) {
    const ops: Op[] = kvs.slice(i, i + 100).map(([key, value]) => (value === null ? { type: 'delete', key } : { type: 'put', key, value }));
    const r = await store.txn([], ops);
    if (!r.succeeded) throw new Error('txn failed');
  }
}

async function attack(t: Test, spec: string, writer: Store): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bs-records-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const a = await startNode(t, dir, 'node-a', '192.0.2.11', spec);
  const b = await startNode(t, dir, 'node-b', '192.0.2.12', spec);

  const podA = await ipcRequest<AssignReply>(a.socket, 'ipam.assign', { handle: 'pod-a', num4: 1 });
  const podB1 = await ipcRequest<AssignReply>(b.socket, 'ipam.assign', { handle: 'pod-b1', num4: 1 });
  await ipcRequest<AssignReply>(b.socket, 'ipam.assign', { handle: 'pod-b2', num4: 1 });
  const blockA = podA.ips[0].block;
  const blockB = podB1.ips[0].block;
  t.not(blockA, blockB, `node-a holds ${blockA}, node-b ${blockB}`);
  const keyA = keys.block(blockA);
  const good = (await writer.get(keyA))!.value;

  /** Everything node B serves from IPAM still works and shows its own block (and A's unless it is corrupt). */
  const bServes = async (t: Test, what: string, corrupt = true): Promise<void> => {
    const blocks = await b.get('/ipam/blocks');
    t.equal(blocks.status, 200, `${what}: /ipam/blocks answers 200`);
    t.same((blocks.body as { cidr: string }[]).map((x) => x.cidr).sort(), corrupt ? [blockB] : [blockA, blockB].sort(),
      `${what}: /ipam/blocks lists ${corrupt ? "node-b's block, not the corrupt one" : 'both blocks'}`);
    const pools = await b.get('/ipam/pools');
    t.equal(pools.status, 200, `${what}: /ipam/pools answers 200`);
    t.match(pools.body, [{ name: 'pods', blocks: corrupt ? 1 : 2 }]);
    t.same((await b.get('/ipam/blocks?host=node-b')).body.map((x: { cidr: string }) => x.cidr), [blockB]);
    const o = await b.get('/overview');
    t.equal(o.status, 200, `${what}: /overview answers 200`);
    t.same(o.body.ipam.blocks.map((x: { cidr: string }) => x.cidr), [blockB]);
    t.same(o.body.ipam.announced, [blockB], `${what}: node-b's announcer still announces its block`);
    const show = await ipcRequest<{ blocks: { cidr: string }[] }>(b.socket, 'show.ipam');
    t.same(show.blocks.map((x) => x.cidr).sort(), corrupt ? [blockB] : [blockA, blockB].sort(), `${what}: show ipam works`);
    const handles = await ipcRequest<{ handles: { handle: string }[] }>(b.socket, 'ipam.handles', {});
    t.same(handles.handles.map((h) => h.handle), ['pod-b1', 'pod-b2'], `${what}: ipam.handles (CNI GC) lists node-b's handles`);
    const oa = await a.get('/overview');
    t.equal(oa.status, 200, `${what}: node-a's /overview answers 200 too`);
    t.ok(oa.body.ipam.announced.includes(blockA), `${what}: node-a still announces its block (its affinity stands)`);
  };

  await bServes(t, 'before', false);
  let n = 0;
  for (const c of corruptions(good, blockB)) {
    const value = c.value(n++);
    await writer.put(keyA, value);
    const w = await waitFor(`node-b warns about ${keyA}`, async () => {
      await b.get('/ipam/blocks'); // a read that meets the new version
      const ws = about(await warningsOf(b), keyA);
      return ws.length === 1 && c.says.test(ws[0].message) && ws;
    });
    t.equal(w.length, 1, `${c.kind}: one warning names ${keyA}`);
    t.match(w[0].message, c.says, `${c.kind}: it says what is wrong`);
    await bServes(t, c.kind);
    t.equal((await writer.get(keyA))!.value, value, `${c.kind}: the corrupt record is left exactly as written`);
  }

  // Writers: node-a skips its unreadable block and allocates elsewhere; releasing the pod in it is refused, naming
  // the key (libcalico-go returns that block's error); node-b assigns and releases (CNI DEL, GC) as before.
  const podA2 = await ipcRequest<AssignReply>(a.socket, 'ipam.assign', { handle: 'pod-a2', num4: 1 });
  t.not(podA2.ips[0].block, blockA, `node-a's next pod comes from another block (${podA2.ips[0].block})`);
  const refused = await ipcRequest<ReleaseReply>(a.socket, 'ipam.release', { handle: 'pod-a' }).catch((e: IpcError) => e);
  t.ok(refused instanceof IpcError && refused.remoteCode === 'CORRUPT', 'releasing the pod in the corrupt block is refused');
  t.match((refused as Error).message, keyA, 'and the refusal names the key');
  const b3 = await ipcRequest<AssignReply>(b.socket, 'ipam.assign', { handle: 'pod-b3', num4: 1 });
  t.equal(b3.ips[0].block, blockB, 'node-b assigns from its block');
  t.same((await ipcRequest<ReleaseReply>(b.socket, 'ipam.release', { handle: 'pod-b3' })).released, b3.ips.map((x) => x.ip), 'node-b releases (CNI DEL)');
  const lastCorrupt = (await writer.get(keyA))!.value;
  await t.rejects(a.d.ipam!.assignIP({ host: 'node-a', ip: formatIP(ipAt(parsePrefix(blockA), 9)) }), { code: 'CORRUPT' }, 'no address is assigned into it');
  await t.rejects(a.d.ipam!.releaseAffinity(blockA, 'node-a'), { code: 'CORRUPT' }, 'its affinity is not released over it');
  t.equal((await writer.get(keyA))!.value, lastCorrupt, 'after all that, the corrupt record is still exactly as written');

  // 300 rewrites (each a new revision, read now and then by node B's views): still one entry, counted.
  const kinds = corruptions(good, blockB);
  for (let i = 0; i < 300; i++) {
    await writer.put(keyA, kinds[i % kinds.length].value(1000 + i));
    if (i % 10 === 9) await b.get('/ipam/blocks');
  }
  await b.get('/ipam/blocks');
  const after = await warningsOf(b);
  t.equal(about(after, keyA).length, 1, 'after 300 rewrites: exactly one warning names the key');
  t.ok(about(after, keyA)[0].count > 30, `counted (${about(after, keyA)[0].count} versions seen)`);
  t.equal(after.entries.length, 1, 'and it is the only warning');
  t.same((await b.get('/overview')).body.warnings, after, '/overview carries the same list');
  const logged = b.logs.filter((l) => l.includes(keyA)).length;
  t.ok(logged <= 2, `logged ${logged} time(s), not once per version`);

  // Fixed: the block is served again, its warning goes, and node-a can release its pod.
  await writer.put(keyA, good);
  await waitFor('the warning goes once the block is fixed', async () => {
    await b.get('/ipam/blocks');
    return about(await warningsOf(b), keyA).length === 0;
  });
  t.ok((await b.get('/ipam/blocks')).body.some((x: { cidr: string }) => x.cidr === blockA), 'the fixed block is served again');
  t.same((await ipcRequest<ReleaseReply>(a.socket, 'ipam.release', { handle: 'pod-a' })).released, podA.ips.map((x) => x.ip), 'node-a releases its pod');

  // Settings that do not decode: the last good ones go on being used, and /ipam/config says why.
  const settings = (await writer.get(keys.config))!.value;
  await writer.put(keys.config, '{"maxBlocksPerHost":-1}');
  const cfg = await b.get('/ipam/config');
  t.equal(cfg.status, 200, '/ipam/config answers 200 with unreadable settings');
  t.match(cfg.body, { inForce: keys.config, config: { maxBlocksPerHost: 0 }, error: /maxBlocksPerHost must be a whole number/ });
  t.equal((await ipcRequest<AssignReply>(b.socket, 'ipam.assign', { handle: 'pod-b5', num4: 1 })).ips.length, 1, 'node-b assigns with the last good settings');
  t.equal(about(await warningsOf(b), keys.config).length, 1, 'one warning names the settings key');
  await writer.put(keys.config, settings);
  await ipcRequest<AssignReply>(b.socket, 'ipam.assign', { handle: 'pod-b6', num4: 1 }); // reads the settings
  t.equal(about(await warningsOf(b), keys.config).length, 0, 'fixed, its warning goes');

  // 10,000 distinct corrupt keys: the list stays at its bound, node-b keeps working; deleted, they are forgotten.
  const many: [string, string | null][] = [];
  for (let i = 0; i < 10_000; i++) {
    many.push([i % 2 ? keys.block(`10.251.${i >> 8}.${i & 255}/32`) : `${keys.blocks}junk-${i}`, i % 3 ? '{"cidr":' : `{"cidr":"10.251.0.0/32","n":${i}}`]);
  }
  await putMany(writer, many);
  const started = Date.now();
  const blocks = await b.get('/ipam/blocks');
  t.equal(blocks.status, 200, `/ipam/blocks with 10,000 corrupt keys: 200 in ${Date.now() - started} ms`);
  t.same(blocks.body.map((x: { cidr: string }) => x.cidr).sort(), [blockA, blockB, podA2.ips[0].block].sort(), 'only the good blocks');
  const bounded = await warningsOf(b);
  t.equal(bounded.entries.length, bounded.limit, `the list holds ${bounded.limit} entries`);
  t.ok(bounded.evicted >= 10_000 - bounded.limit, `${bounded.evicted} older ones evicted and counted`);
  const size = (await b.get('/warnings')).text.length;
  t.ok(size < 200_000, `/warnings is ${size} bytes`);
  t.ok((await b.get('/overview')).text.length < 250_000, '/overview stays small');
  const b4 = await ipcRequest<AssignReply>(b.socket, 'ipam.assign', { handle: 'pod-b4', num4: 1 });
  t.equal(b4.ips.length, 1, 'node-b still assigns');
  await putMany(writer, many.map(([k]) => [k, null]));
  await b.get('/ipam/blocks');
  t.same((await warningsOf(b)).entries.filter((e) => e.key?.startsWith(keys.blocks)), [], 'deleted, their warnings go');
}

t.test('a corrupt block on the embedded file store', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bs-records-store-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const spec = join(dir, 'store');
  const writer = await openStore(spec);
  t.teardown(() => writer.close());
  await attack(t, spec, writer);
});

t.test('a corrupt block on a real etcd', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const writer = await openStore(etcd.url);
  t.teardown(() => writer.close());
  await attack(t, etcd.url, writer);
});

// ---- properties: any JSON as a record ------------------------------------------------------------------------

const POOL = validatePool({ name: 'p', cidr: '10.0.0.0/16', blockSize: 28 });
const CIDR = '10.0.0.16/28';
const BLOCK_KEY = keys.block(CIDR);

/** A good block with some allocations, releases and attributes. */
const goodBlock = fc.record({ take: fc.nat(16), free: fc.nat(16), os: fc.constantFrom('linux', 'windows') as fc.Arbitrary<'linux' | 'windows'>, handles: fc.nat(3) }).map(({ take, free, os, handles }) => {
  const b = newBlock({ cidr: parsePrefix(CIDR), pool: { ...POOL, reservation: { kind: 'auto' } }, poolPrefix: parsePrefix(POOL.cidr), host: 'a', os, hostReservation: true });
  for (let i = 0; i < take; i++) allocate(b, 1, { handle: i % (handles + 1) ? `h${i % (handles + 1)}` : null, host: i % 2 ? 'a' : 'b', natOutgoing: false, ...(i % 3 ? { attrs: { pod: `p${i}` } } : {}) }, 1000, 5000);
  for (let o = 0; o < free; o++) release(b, o, 2000, 5000);
  return JSON.parse(JSON.stringify(b)) as Record<string, unknown>;
});

/** JSON of anything: any value, a good block, or a good block with one field replaced, removed, or an entry changed. */
const anyBlockJson = fc.oneof(
  fc.jsonValue().map((v) => JSON.stringify(v)),
  goodBlock.map((o) => JSON.stringify(o)),
  fc.tuple(goodBlock, fc.constantFrom('cidr', 'pool', 'affinity', 'os', 'borrowable', 'allocations', 'unallocated', 'reserved', 'attributes', 'released', 'hostReservation', 'ext', 'extra'), fc.jsonValue())
    .map(([o, k, v]) => JSON.stringify({ ...o, [k]: v })),
  fc.tuple(goodBlock, fc.constantFrom('cidr', 'pool', 'affinity', 'os', 'borrowable', 'allocations', 'unallocated', 'reserved', 'attributes', 'released'))
    .map(([o, k]) => {
      const { [k]: _drop, ...rest } = o;
      return JSON.stringify(rest);
    }),
  fc.tuple(goodBlock, fc.constantFrom('allocations', 'unallocated', 'reserved', 'attributes'), fc.nat(20), fc.jsonValue(), fc.boolean())
    .map(([o, k, i, v, remove]) => {
      const list = [...(o[k] as unknown[])];
      if (remove) list.splice(i % Math.max(1, list.length), 1);
      else list[i % (list.length + 1)] = v;
      return JSON.stringify({ ...o, [k]: list });
    }),
  fc.string().map((s) => `{"cidr":${s}`),
);

t.test('property: any JSON written as a block decodes into a block that round-trips, or is refused naming its key', async (t) => {
  let good = 0;
  let bad = 0;
  await fc.assert(fc.asyncProperty(anyBlockJson, async (text) => {
    const store = new MemoryStore();
    const warnings: [string, string][] = [];
    const ipam = new Ipam(store, { warn: (m, k) => warnings.push([m, k]) });
    await store.put(keys.pool('p'), JSON.stringify(POOL));
    await store.put(BLOCK_KEY, text);
    const r = await ipam.ds.readBlock(CIDR);
    if (r.value) {
      good++;
      const b = r.value;
      const c = blockCounts(b);
      if (c.allocated + c.free + c.reserved !== c.size) throw new Error(`accepted a block whose counts do not add up: ${text}`);
      const again = blockspeakerLayout.decodeBlock({ key: BLOCK_KEY, value: blockspeakerLayout.encodeBlock(b), createRevision: 1, modRevision: 1 }, []);
      if (!isDeepStrictEqual(again, b)) throw new Error(`does not round-trip: ${text}`);
      if (warnings.length) throw new Error(`warned about a good block: ${warnings[0][0]}`);
    } else {
      bad++;
      if (r.problem === undefined) throw new Error('neither a block nor a problem');
      if (warnings.length !== 1 || warnings[0][1] !== BLOCK_KEY || !warnings[0][0].includes(BLOCK_KEY)) throw new Error(`no single warning naming the key: ${JSON.stringify(warnings)}`);
      let thrown: unknown;
      try {
        blockspeakerLayout.decodeBlock({ key: BLOCK_KEY, value: text, createRevision: 1, modRevision: 1 }, []);
      } catch (e) {
        thrown = e;
      }
      if (!(thrown instanceof RecordError) || !thrown.message.startsWith(`${BLOCK_KEY}: `)) throw new Error(`refused with ${String(thrown)}, not a RecordError naming the key`);
    }
    // The views read it without throwing, and so do the writers that meet it.
    await ipam.blocks();
    await ipam.routes('a');
    await ipam.setHost({ name: 'a', os: 'linux', labels: {} });
    await ipam.autoAssign({ host: 'a', num4: 1, handle: 'x' });
    await ipam.releaseByHandle('x');
    if (!r.value) t.equal((await store.get(BLOCK_KEY))!.value, text);
  }), { numRuns: 400 });
  t.ok(good > 30 && bad > 30, `both kinds met (${good} decoded, ${bad} refused)`);
});

t.test('property: any JSON written as an affinity or a handle decodes or is refused naming its key', async (t) => {
  const affKey = keys.affinity('a', CIDR);
  const handleKey = keys.handle('h/1');
  const anyAffinity = fc.oneof(
    fc.jsonValue(),
    fc.record({ host: fc.constantFrom('a', 'b', 1), cidr: fc.constantFrom(CIDR, '10.0.0.0/28', '10.0.0.17/28', 'x'), state: fc.constantFrom('pending', 'confirmed', 'pendingDeletion', 'gone', null) }, { requiredKeys: [] }),
  ).map((v) => JSON.stringify(v));
  const anyHandle = fc.oneof(
    fc.jsonValue(),
    fc.record({ handle: fc.constantFrom('h/1', 'h', null), blocks: fc.dictionary(fc.constantFrom(CIDR, '10.0.0.0/8', '10.0.0.1/28', 'x'), fc.oneof(fc.integer({ min: -2, max: 20 }), fc.jsonValue())) }, { requiredKeys: [] }),
  ).map((v) => JSON.stringify(v));
  await fc.assert(fc.asyncProperty(anyAffinity, anyHandle, async (aff, handle) => {
    const store = new MemoryStore();
    const warnings: string[] = [];
    const ds = new IpamStore(store, blockspeakerLayout, { warn: (m, k) => warnings.push(`${k}|${m}`) });
    await store.put(affKey, aff);
    await store.put(handleKey, handle);
    const [affs, h] = [await ds.affinities(), await ds.handle('h/1')];
    if (affs.length) {
      const again = blockspeakerLayout.decodeAffinity({ key: affKey, value: blockspeakerLayout.encodeAffinity(affs[0].value), createRevision: 1, modRevision: 1 });
      if (!isDeepStrictEqual(again, affs[0].value)) throw new Error(`affinity does not round-trip: ${aff}`);
    } else if (!warnings.some((w) => w.startsWith(`${affKey}|`) && w.includes(affKey))) throw new Error(`affinity refused without naming its key: ${aff}`);
    if (h) {
      const again = blockspeakerLayout.decodeHandle({ key: handleKey, value: blockspeakerLayout.encodeHandle(h.value), createRevision: 1, modRevision: 1 });
      if (!isDeepStrictEqual(again, h.value)) throw new Error(`handle does not round-trip: ${handle}`);
      for (const [cidr, n] of Object.entries(h.value.blocks)) if (!(n >= 1 && n <= 16 && parsePrefix(cidr).toString() === cidr)) throw new Error(`accepted a count of ${n} in ${cidr}`);
    } else if (!warnings.some((w) => w.startsWith(`${handleKey}|`) && w.includes(handleKey))) throw new Error(`handle refused without naming its key: ${handle}`);
  }), { numRuns: 300 });
  t.pass('every affinity and handle decoded or was refused naming its key');
});

t.test('writers never write over a record they cannot read', async (t) => {
  const store = new MemoryStore();
  const warnings: string[] = [];
  const ipam = new Ipam(store, { warn: (m) => warnings.push(m) });
  await ipam.addPool({ name: 'p', cidr: '10.0.0.0/24', blockSize: 28 });
  await ipam.setHost({ name: 'a', os: 'linux', labels: {} });
  const first = await ipam.autoAssign({ host: 'a', num4: 1, handle: 'h1' });
  const cidr = first.ipv4[0].block;
  // The handle record is unreadable: a request with that handle fails before anything is allocated.
  await store.put(keys.handle('h1'), '{"handle":"h1","blocks":{"10.0.0.0/28":"lots"}}');
  await t.rejects(ipam.autoAssign({ host: 'a', num4: 1, handle: 'h1' }), { code: 'CORRUPT', message: /handle h1: \/blockspeaker\/ipam\/v1\/handles\/h1 cannot be read/ });
  await t.rejects(ipam.releaseByHandle('h1'), { code: 'CORRUPT' });
  t.equal((await ipam.blocks('a'))[0].allocated, 1, 'nothing allocated or released meanwhile');
  t.equal((await store.get(keys.handle('h1')))!.value, '{"handle":"h1","blocks":{"10.0.0.0/28":"lots"}}', 'the handle is left as written');
  await store.put(keys.handle('h1'), JSON.stringify({ handle: 'h1', blocks: { [cidr]: 1 } }));
  // The block is unreadable: assignments go elsewhere, claims of it fail, releases of its addresses are refused.
  await store.put(keys.block(cidr), '[]');
  const next = await ipam.autoAssign({ host: 'a', num4: 1, handle: 'h2' });
  t.not(next.ipv4[0].block, cidr, 'the next address comes from another block');
  t.same(await ipam.claimAffinity(cidr, 'a'), { claimed: [], failed: [cidr] }, 'claiming it fails');
  await t.rejects(ipam.releaseIPs([first.ipv4[0].ip]), { code: 'CORRUPT' });
  await t.rejects(ipam.deletePool('p'), { code: 'CORRUPT', message: new RegExp(keys.block(cidr)) }, 'the pool is not deleted under it');
  t.same((await ipam.releaseIPs([next.ipv4[0].ip])).released, [next.ipv4[0].ip], 'other releases go on');
  t.equal((await store.get(keys.block(cidr)))!.value, '[]');
  t.ok(warnings.some((w) => w.includes(keys.block(cidr))));
  // Unreadable settings: refused by a fresh process, the last good ones used by one that read them, and rewritten.
  const other = new Ipam(store, { warn: () => undefined });
  await store.put(keys.config, '{"strictAffinity":"yes"}');
  await t.rejects(other.autoAssign({ host: 'a', num4: 1 }), { code: 'CORRUPT', message: /\/blockspeaker\/ipam\/v1\/config cannot be read/ });
  t.equal((await ipam.autoAssign({ host: 'a', num4: 1 })).ipv4.length, 1, 'the process that read good settings goes on with them');
  await other.setConfig({ strictAffinity: true });
  t.equal((await other.getConfig()).strictAffinity, true, 'setting them again repairs them');
});

// ---- the warning list ------------------------------------------------------------------------------------------

t.test('warnings: one entry per key with a count, bounded, cleared, logged at most once a minute per entry', async (t) => {
  let now = Date.parse('2024-05-01T00:00:00Z');
  const logged: string[] = [];
  const w = new WarningLog({ limit: 4, now: () => now, log: (m) => logged.push(m) });
  for (let i = 0; i < 300; i++) {
    now += 100;
    w.add(`skipping block /k: version ${i}`, '/k');
  }
  t.equal(w.size, 1);
  t.match(w.list()[0], { key: '/k', message: 'skipping block /k: version 299', count: 300, firstSeen: '2024-05-01T00:00:00.100Z', lastSeen: '2024-05-01T00:00:30.000Z' });
  t.same(logged, ['skipping block /k: version 0'], 'logged when new; again only after a minute');
  now += 60_000;
  w.add('skipping block /k: again', '/k');
  t.same(logged.at(-1), 'skipping block /k: again (seen 301 times)');
  w.add('pool x differs');
  w.add('pool x differs');
  t.equal(w.list()[1].count, 2, 'a warning without a key is keyed by its text');
  for (let i = 0; i < 10_000; i++) w.add(`bad ${i}`, `/many/${i}`);
  t.equal(w.size, 4, 'never more than the limit');
  t.equal(w.evicted, 10_000 + 2 - 4, 'evictions are counted');
  t.same(w.messages(), ['bad 9996', 'bad 9997', 'bad 9998', 'bad 9999'], 'the least recently seen go first');
  t.ok(w.clear('/many/9999'));
  t.equal(w.size, 3, 'a fixed record takes its entry away');
  w.add('x'.repeat(100_000), 'k'.repeat(100_000));
  const big = w.list().at(-1)!;
  t.ok(big.message.length <= 1000 && big.key!.length <= 300, 'long messages and keys are cut');
  w.add('y', `${'k'.repeat(100_000)}z`);
  t.equal(w.list().filter((e) => e.key?.startsWith('kkk')).length, 2, 'two long keys that differ past the cut stay distinct');
});
