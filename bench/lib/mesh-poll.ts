// The poller of bench/mesh-join.ts, run inside the lab's switch namespace (where etcd and every node's status
// endpoint are reachable; the bench process itself is in the host's namespace and reaches neither). It reads one
// JSON request per line on stdin and answers one JSON line on stdout with the same id:
//   { id, op: 'get', urls }                      -> { id, results: [{ status, body }] }   (many GETs at once)
//   { id, op: 'join', key, olds, newcomer, want, timeoutMs, pollMs }
//        -> { id, armed: true } once the etcd watch on `key` is in place, { id, seen: true } when the put is seen
//           (so the bench can read CPU counters at t0), then { id, ... } when converged:
//           t0 is the moment the registration (a put of `key`) is seen; converged is the first poll at which every
//           old node has `newcomer.prefix` in its RIB and the newcomer has every prefix of `want`.
//   { id, op: 'del', key }                       -> { id, deleted }
import { createInterface } from 'node:readline';
import { Agent, request } from 'node:http';
import { Etcd3 } from 'etcd3';

const etcd = new Etcd3({ hosts: process.argv[2] ?? 'http://10.77.0.254:2379' });
const agent = new Agent({ keepAlive: true, maxSockets: 4 });

function get(url: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve) => {
    const req = request(url, { agent, timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = null;
        try {
          body = JSON.parse(text);
        } catch {
          body = null;
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0, body: null }));
    req.end();
  });
}

const reply = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface JoinReq {
  id: number;
  key: string;
  /** Old nodes: status base URL; each must learn newcomer.prefix. */
  olds: { name: string; url: string }[];
  newcomer: { url: string; prefix: string };
  /** Prefixes the newcomer must have (every old node's block). */
  want: string[];
  timeoutMs: number;
  pollMs: number;
}

async function join(q: JoinReq): Promise<void> {
  let t0 = 0;
  const seen = new Promise<void>((resolve) => {
    void etcd.watch().key(q.key).create().then((w) => {
      w.on('put', () => {
        if (t0 === 0) {
          t0 = performance.now();
          void w.cancel();
          resolve();
        }
      });
      reply({ id: q.id, armed: true });
    });
  });
  await seen;
  const t0Wall = Date.now();
  reply({ id: q.id, seen: true, t0Wall });
  const pending = new Set(q.olds.map((o) => o.name));
  const oldAt: Record<string, number> = {};
  let newcomerAt = -1;
  let newcomerHave = 0;
  let polls = 0;
  const enc = encodeURIComponent(q.newcomer.prefix);
  for (;;) {
    const elapsed = performance.now() - t0;
    if (elapsed > q.timeoutMs) {
      reply({ id: q.id, t0Wall, converged: false, elapsedMs: elapsed, missingAt: [...pending], newcomerHave, polls });
      return;
    }
    polls++;
    const checks: Promise<void>[] = [];
    for (const o of q.olds) {
      if (!pending.has(o.name)) continue;
      checks.push(get(`${o.url}/routes?prefix=${enc}`).then((r) => {
        if (r.status === 200 && pending.delete(o.name)) oldAt[o.name] = performance.now() - t0;
      }));
    }
    if (newcomerAt < 0) {
      checks.push(get(`${q.newcomer.url}/routes?family=ipv4&limit=0`).then((r) => {
        const have = new Set<string>((r.body?.routes ?? []).map((x: { prefix: string }) => x.prefix));
        newcomerHave = q.want.filter((p) => have.has(p)).length;
        if (newcomerHave === q.want.length) newcomerAt = performance.now() - t0;
      }));
    }
    await Promise.all(checks);
    if (pending.size === 0 && newcomerAt >= 0) {
      const olds = Object.values(oldAt).sort((a, b) => a - b);
      reply({
        id: q.id, t0Wall, converged: true, polls,
        convergedMs: Math.max(newcomerAt, olds[olds.length - 1] ?? 0),
        newcomerAllMs: newcomerAt,
        oldsFirstMs: olds[0], oldsMedianMs: olds[Math.floor((olds.length - 1) / 2)], oldsLastMs: olds[olds.length - 1],
      });
      return;
    }
    await sleep(q.pollMs);
  }
}

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const q = JSON.parse(line);
  if (q.op === 'get') {
    void Promise.all((q.urls as string[]).map(get)).then((results) => reply({ id: q.id, results }));
  } else if (q.op === 'join') {
    join(q).catch((e) => reply({ id: q.id, error: String(e) }));
  } else if (q.op === 'del') {
    void etcd.delete().key(q.key).then((r) => reply({ id: q.id, deleted: Number(r.deleted) }));
  } else {
    reply({ id: q.id, error: `unknown op ${q.op}` });
  }
});
rl.on('close', () => {
  etcd.close();
  agent.destroy();
});
