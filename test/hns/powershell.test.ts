// The PowerShell executor: golden scripts (fixtures/hns/*.ps1; UPDATE_GOLDEN=1 rewrites them), literal rendering,
// report parsing, and the executor over a scripted runner (PowerShell itself never runs here).
import t, { type Test } from 'tap';
import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { FakeHns } from '../../src/hns/fake.ts';
import { HCN, type HnsOp, emptySnapshot, subnetsOf } from '../../src/hns/model.ts';
import { planHns } from '../../src/hns/planner.ts';
import {
  type PowerShellResult,
  type PowerShellRunner,
  PowerShellExecutor,
  parseApplyOutput,
  parseReadOutput,
  psString,
  psValue,
  renderApplyScript,
  renderOp,
  renderReadScript,
} from '../../src/hns/powershell.ts';
import { ALIAS, config, desired } from './helpers.ts';

const fixtures = new URL('../../fixtures/hns/', import.meta.url);

function golden(t: Test, name: string, text: string): void {
  const file = new URL(name, fixtures);
  if (process.env.UPDATE_GOLDEN === '1' || !existsSync(file)) {
    mkdirSync(fixtures, { recursive: true });
    writeFileSync(file, text);
    if (process.env.UPDATE_GOLDEN !== '1') t.fail(`${name} was missing and has been written; check it and run again`);
  }
  t.equal(text, readFileSync(file, 'utf8'), `${name} matches the golden file`);
}

t.test('golden: create an l2bridge network, then host routes', async (t) => {
  const d = desired('l2bridge', ['10.0.123.0/26', '10.0.200.0/26', '10.9.0.4/30', '10.9.0.9/32'], { '10.0.5.0/26': '192.168.1.5', '10.0.7.9/32': '192.168.1.7' });
  const { ops } = planHns(emptySnapshot(), d);
  golden(t, 'create-l2bridge.ps1', renderApplyScript(ops, { network: 'pods' }));
});

t.test('golden: overlay update (stale policy out first, subnets before ip-subnets)', async (t) => {
  const fake = new FakeHns();
  const d1 = desired('overlay', ['10.0.123.0/26', '10.0.200.0/26', '10.9.0.4/30'], { '10.0.5.0/26': '192.168.1.5', '10.0.6.0/26': '192.168.1.6' });
  t.notOk(fake.applyAll(planHns(fake.snapshot(), d1).ops).error);
  // A third pool appears; a block and the micropool's block go; a remote block moves.
  const pools = [...config('overlay').pools, { cidr: '10.10.0.0/24', gateway: '10.10.0.1', reservation: { kind: 'none' as const } }];
  const d2 = desired('overlay', ['10.0.123.0/26', '10.0.201.0/26', '10.10.0.8/30'], { '10.0.5.0/26': '192.168.1.7', '10.0.6.0/26': '192.168.1.6' }, { pools });
  const { ops } = planHns(fake.snapshot(), d2);
  t.same(ops.map((o) => o.op), ['remove-policy', 'remove-ip-subnet', 'remove-subnet', 'add-subnet', 'add-ip-subnet', 'add-policy']);
  golden(t, 'update-overlay.ps1', renderApplyScript(ops, { network: 'pods', module: 'C:\\Program Files\\blockspeaker\\hns.v2.psm1' }));
  t.notOk(fake.applyAll(ops).error, 'and the fake takes the same ops');
});

t.test('golden: Get-HnsNetwork JSON without IDs: IDs looked up by prefix at run time', async (t) => {
  const fake = new FakeHns();
  t.notOk(fake.applyAll(planHns(fake.snapshot(), desired('l2bridge', ['10.0.1.0/26'])).ops).error);
  const snap = fake.snapshot();
  for (const s of subnetsOf(snap.Networks[0])) {
    delete s.ID;
    for (const i of s.IpSubnets!) delete i.ID;
  }
  const { ops } = planHns(snap, desired('l2bridge', ['10.0.2.0/26', '10.9.0.4/30']));
  golden(t, 'no-ids-l2bridge.ps1', renderApplyScript(ops, { network: "pod's" }));
});

t.test('golden: read script', async (t) => {
  golden(t, 'read-l2bridge.ps1', renderReadScript({ network: 'pods', interfaceAlias: ALIAS }));
});

t.test('PowerShell literals', async (t) => {
  t.equal(psString("it's"), "'it''s'");
  t.equal(psString('a\u2019b'), "'a\u2019\u2019b'", 'typographic quotes doubled too');
  t.equal(psValue({ IpAddressPrefix: '10.0.0.0/16', Routes: [{ NextHop: '10.0.0.1' }], Policies: [], Flags: 3, X: true, Y: null, 'a-b': 1 }),
    "@{ IpAddressPrefix = '10.0.0.0/16'; Routes = @(@{ NextHop = '10.0.0.1' }); Policies = @(); Flags = 3; X = $true; Y = $null; 'a-b' = 1 }");
  t.equal(psValue({}), '@{}');
  t.throws(() => psValue(NaN));
});

t.test('report parsing', async (t) => {
  const ok = (n: number) => Array.from({ length: n }, (_, i) => `##blockspeaker ok ${i}`).join('\r\n');
  t.same(parseApplyOutput({ code: 0, stdout: `noise\r\n${ok(3)}\r\n`, stderr: '' }, 3), { applied: 3 });
  const f = parseApplyOutput({ code: 3, stdout: `${ok(1)}\r\n##blockspeaker fail 1 0x803B0012 HcnModifyNetwork failed: policy already exists\r\n`, stderr: '' }, 3);
  t.equal(f.applied, 1);
  t.match(f.error, { code: HCN.POLICY_ALREADY_EXISTS, message: /policy already exists/ });
  const died = parseApplyOutput({ code: 1, stdout: ok(1), stderr: 'Import-Module : The specified module was not loaded' }, 2);
  t.equal(died.applied, 1);
  t.match(died.error!.message, /stopped after 1 of 2 .*module was not loaded/);
  t.notOk((died.error as { notFound?: boolean }).notFound, 'a dead script is not NOT_FOUND');
});

t.test('read output: a failed read throws, whatever its code', async (t) => {
  const s = parseReadOutput({ code: 0, stdout: '##blockspeaker state {"Networks":{"Name":"pods","Type":"L2Bridge","Ipams":{"Subnets":{"IpAddressPrefix":"10.0.0.0/16"}}},"Endpoints":[],"HostRoutes":null}\r\n', stderr: '' });
  t.equal(s.Networks[0].Ipams![0].Subnets![0].IpAddressPrefix, '10.0.0.0/16');
  t.throws(() => parseReadOutput({ code: 1, stdout: '', stderr: 'HcnEnumerateNetworks failed 0x803B0001' }), /reading HNS state failed/);
  t.throws(() => parseReadOutput({ code: 0, stdout: 'nothing', stderr: '' }), /reading HNS state failed/);
});

/**
 * A runner that plays HNS: it finds each op of a script by its rendered text, applies it to a fake, and answers
 * like the script would (ok lines, then a fail line with the HRESULT, and stops).
 */
class FakeRunner implements PowerShellRunner {
  scripts: string[] = [];
  private readonly byText = new Map<string, HnsOp>();
  constructor(private readonly fake: FakeHns) {}
  expect(ops: readonly HnsOp[]): void {
    for (const op of ops) this.byText.set(renderOp(op).join('\n'), op);
  }
  async run(script: string): Promise<PowerShellResult> {
    this.scripts.push(script);
    if (script.includes('read state')) return { code: 0, stdout: `##blockspeaker state ${JSON.stringify(this.fake.snapshot())}\r\n`, stderr: '' };
    const lines: string[] = [];
    for (const [i, block] of script.split('\r\n\r\n# [').slice(1).entries()) {
      const body = block.split('\r\n');
      const end = body.findIndex((l) => l.startsWith('    Write-BsResult'));
      const op = this.byText.get(body.slice(2, end).map((l) => l.slice(4)).join('\n'));
      if (!op) throw new Error(`unknown op in script: ${body[0]}`);
      try {
        this.fake.applyOp(op);
        lines.push(`##blockspeaker ok ${i}`);
      } catch (e) {
        const err = e as { code: number; message: string };
        lines.push(`##blockspeaker fail ${i} 0x${(err.code >>> 0).toString(16).toUpperCase().padStart(8, '0')} ${err.message}`);
        return { code: 3, stdout: lines.join('\r\n'), stderr: '' };
      }
    }
    return { code: 0, stdout: lines.join('\r\n'), stderr: '' };
  }
}

t.test('executor: batches, NOT_FOUND on a remove counts as done, other errors stop', async (t) => {
  const fake = new FakeHns();
  const runner = new FakeRunner(fake);
  const ex = new PowerShellExecutor({ runner, network: 'pods', interfaceAlias: ALIAS, batchSize: 2 });
  const d = desired('l2bridge', ['10.0.1.0/26', '10.9.0.4/30'], { '10.0.5.0/26': '192.168.1.5', '10.0.6.0/26': '192.168.1.5', '10.0.7.0/26': '192.168.1.5' });
  const plan = planHns(await ex.read(), d);
  runner.expect(plan.ops);
  t.same(await ex.apply(plan.ops), { applied: 4 });
  t.equal(runner.scripts.filter((s) => !s.includes('read state')).length, 2, 'two scripts of two ops');
  t.same(planHns(await ex.read(), d).ops, [], 'read back: nothing left');

  // Someone removed a route by hand: our remove answers NOT_FOUND and the rest still runs.
  const d2 = desired('l2bridge', ['10.0.1.0/26'], {});
  const plan2 = planHns(await ex.read(), d2);
  t.same(plan2.ops.map((o) => o.op), ['remove-host-route', 'remove-host-route', 'remove-host-route', 'remove-subnet']);
  runner.expect(plan2.ops);
  fake.loseHostRoutes((r) => r.DestinationPrefix === '10.0.5.0/26');
  t.same(await ex.apply(plan2.ops), { applied: 4 }, 'NOT_FOUND on remove-host-route counts as done');
  t.same(planHns(await ex.read(), d2).ops, []);

  // A real failure stops the run and names the op.
  const bad = planHns(emptySnapshot(), desired('l2bridge', ['10.0.1.0/26'])).ops;
  (bad[0].body as { Ipams: { Subnets: { IpAddressPrefix: string }[] }[] }).Ipams[0].Subnets[0].IpAddressPrefix = '10.0.0.1/16';
  const runner3 = new FakeRunner(new FakeHns());
  runner3.expect(bad);
  const r3 = await new PowerShellExecutor({ runner: runner3, network: 'pods' }).apply(bad);
  t.equal(r3.applied, 0);
  t.match(r3, { failedOp: { op: 'create-network' }, error: { code: HCN.INVALID_PREFIX } });
});
