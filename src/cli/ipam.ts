// `blockspeaker ipam --store DIR <command>`: drive IPAM directly against a store. JSON on stdout.
import { Ipam } from '../ipam/ipam.ts';
import { layoutByName } from '../ipam/layouts.ts';
import { checkCalico } from '../ipam/calico/check.ts';
import { migrateLayout } from '../ipam/migrate-layout.ts';
import type { Host, PoolSpec, ReservationPolicy, Use } from '../ipam/types.ts';
import { migrateStore } from '../store/migrate.ts';
import type { EtcdSecurity } from '../store/etcd-auth.ts';
import { isEtcdUrl, openStore } from '../store/open.ts';
import { boolOption, CliError, intOption, parse, printJson, required } from './args.ts';

const HELP = `usage: blockspeaker ipam --store DIR|etcd://HOST:PORT[,HOST:PORT...] [--layout blockspeaker|calico] <command> [options]

  --layout calico (or --store calico+etcd://...): read and write Calico's own IPAM v2 keys and JSON in that etcd,
  the ones calico-node and calicoctl use (pools are IPPool resources there).

commands:
  pool add --name N --cidr C [--block-size S] [--node-selector EXPR] [--disabled] [--allowed-uses Workload,Tunnel]
           [--nat-outgoing] [--disable-bgp-export] [--reserve per-block:3:1|per-host:N|per-pool:N|none|auto]
  pool list | pool delete --name N
  host set --name H --os linux|windows [--label k=v ...]
  config set [--strict-affinity true|false] [--max-blocks-per-host N] [--auto-allocate-blocks true|false] [--ip-cooldown S]
  config show
  assign --host H [--num4 N] [--num6 N] [--handle ID] [--pool CIDR|NAME ...] [--use Workload|Tunnel] [--max-blocks N]
  assign-ip --host H --ip A [--handle ID]
  release --ip A [--ip A ...] | release --handle ID
  claim --host H --cidr C
  release-affinity --host H --cidr C [--require-empty]
  blocks [--host H]
  routes --host H
  check                                       (calico layout) report what calicoctl ipam check reports: leaked
                                              addresses/handles, gone nodes, an address in two blocks, lists that
                                              disagree; exit 1 when there are problems (notes do not count)
  (--daemon [--socket PATH]: assign/release through the running daemon instead; see blockspeaker ipam --daemon --help)
  migrate --to etcd://HOST:PORT[,...] [--force]   copy every key of --store into another store (stop writers first);
                                                  refuses a target that already has IPAM keys unless --force
  migrate --to calico+etcd://HOST:PORT [--to-layout L]   move IPAM into another layout (here: Calico's keys and
                                                  JSON; back with --layout calico ... --to DIR|etcd://...): records
                                                  are re-encoded, only created, and verified address by address

etcd security (with --store or --to etcds://... for TLS, or etcd://... for user/password only):
  --etcd-ca FILE --etcd-cert FILE --etcd-key FILE   PEM CA that signed etcd's certificate; client certificate and key
  --etcd-user NAME (--etcd-password-file FILE | --etcd-password-env VAR)   etcd user; the password is never logged
  (or BLOCKSPEAKER_ETCD_CA, _CERT, _KEY, _USER, _PASSWORD_FILE; BLOCKSPEAKER_ETCD_PASSWORD holds the password itself)
  --etcd-allow-insecure  send the password over plain etcd:// anyway (a lab; or BLOCKSPEAKER_ETCD_ALLOW_INSECURE=1)
`;

export function parseReservation(text: string | undefined): ReservationPolicy | undefined {
  if (text === undefined) return undefined;
  if (text === 'none') return { kind: 'none' };
  if (text === 'auto') return { kind: 'auto' };
  let m = /^per-block:(\d+):(\d+)$/.exec(text);
  if (m) return { kind: 'perBlock', start: Number(m[1]), end: Number(m[2]) };
  m = /^per-(host|pool):(\d+)$/.exec(text);
  if (m) return m[1] === 'host' ? { kind: 'perHost', count: Number(m[2]) } : { kind: 'perPool', count: Number(m[2]) };
  throw new CliError(`--reserve must be per-block:START:END, per-host:N, per-pool:N, none or auto; got "${text}"`);
}

function parseUses(text: string | undefined): Use[] | undefined {
  if (text === undefined) return undefined;
  const uses = text.split(',').map((s) => s.trim());
  for (const u of uses) if (u !== 'Workload' && u !== 'Tunnel') throw new CliError(`--allowed-uses: unknown use "${u}" (Workload, Tunnel)`);
  return uses as Use[];
}

function parseLabels(list: string[] | undefined): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const item of list ?? []) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new CliError(`--label must be key=value, got "${item}"`);
    labels[item.slice(0, eq)] = item.slice(eq + 1);
  }
  return labels;
}

async function dispatch(ipam: Ipam, words: string[], argv: string[]): Promise<number | void> {
  const cmd = words.join(' ');
  switch (cmd) {
    case 'pool add': {
      const { values: v } = parse(cmd, argv, {
        name: { type: 'string' }, cidr: { type: 'string' }, 'block-size': { type: 'string' }, 'node-selector': { type: 'string' },
        disabled: { type: 'boolean' }, 'allowed-uses': { type: 'string' }, 'nat-outgoing': { type: 'boolean' },
        'disable-bgp-export': { type: 'boolean' }, reserve: { type: 'string' },
      });
      const spec: PoolSpec = { name: required(cmd, v, 'name'), cidr: required(cmd, v, 'cidr') };
      const bs = intOption(cmd, 'block-size', v['block-size'], 0, 128);
      if (bs !== undefined) spec.blockSize = bs;
      if (v['node-selector'] !== undefined) spec.nodeSelector = v['node-selector'];
      if (v.disabled) spec.disabled = true;
      if (v['nat-outgoing']) spec.natOutgoing = true;
      if (v['disable-bgp-export']) spec.disableBGPExport = true;
      const uses = parseUses(v['allowed-uses']);
      if (uses) spec.allowedUses = uses;
      const res = parseReservation(v.reserve);
      if (res) spec.reservation = res;
      printJson(await ipam.addPool(spec));
      return;
    }
    case 'pool list':
      parse(cmd, argv, {});
      printJson(await ipam.listPools());
      return;
    case 'pool delete': {
      const { values: v } = parse(cmd, argv, { name: { type: 'string' } });
      const name = required(cmd, v, 'name');
      await ipam.deletePool(name);
      printJson({ deleted: name });
      return;
    }
    case 'host set': {
      const { values: v } = parse(cmd, argv, { name: { type: 'string' }, os: { type: 'string' }, label: { type: 'string', multiple: true } });
      const host: Host = { name: required(cmd, v, 'name'), os: required(cmd, v, 'os') as Host['os'], labels: parseLabels(v.label) };
      printJson(await ipam.setHost(host));
      return;
    }
    case 'config set': {
      const { values: v } = parse(cmd, argv, {
        'strict-affinity': { type: 'string' }, 'max-blocks-per-host': { type: 'string' },
        'auto-allocate-blocks': { type: 'string' }, 'ip-cooldown': { type: 'string' },
      });
      const patch: Record<string, unknown> = {};
      const sa = boolOption(cmd, 'strict-affinity', v['strict-affinity']);
      if (sa !== undefined) patch.strictAffinity = sa;
      const mb = intOption(cmd, 'max-blocks-per-host', v['max-blocks-per-host'], 0, 1e9);
      if (mb !== undefined) patch.maxBlocksPerHost = mb;
      const aa = boolOption(cmd, 'auto-allocate-blocks', v['auto-allocate-blocks']);
      if (aa !== undefined) patch.autoAllocateBlocks = aa;
      const cd = intOption(cmd, 'ip-cooldown', v['ip-cooldown'], 0, 1e9);
      if (cd !== undefined) patch.ipCooldownSeconds = cd;
      printJson(await ipam.setConfig(patch));
      return;
    }
    case 'config show':
      parse(cmd, argv, {});
      printJson(await ipam.getConfig());
      return;
    case 'assign': {
      const { values: v } = parse(cmd, argv, {
        host: { type: 'string' }, num4: { type: 'string' }, num6: { type: 'string' }, handle: { type: 'string' },
        pool: { type: 'string', multiple: true }, use: { type: 'string' }, 'max-blocks': { type: 'string' },
      });
      const host = required(cmd, v, 'host');
      let num4 = intOption(cmd, 'num4', v.num4, 0, 1 << 20);
      const num6 = intOption(cmd, 'num6', v.num6, 0, 1 << 20);
      if (num4 === undefined && num6 === undefined) num4 = 1;
      if (v.use !== undefined && v.use !== 'Workload' && v.use !== 'Tunnel') throw new CliError(`assign: --use must be Workload or Tunnel, got "${v.use}"`);
      const r = await ipam.autoAssign({
        host, num4, num6, handle: v.handle, pools: v.pool, use: v.use as Use | undefined,
        maxBlocks: intOption(cmd, 'max-blocks', v['max-blocks'], 0, 1e9),
      });
      printJson({ ipv4: r.ipv4.map((a) => `${a.ip}/${a.prefixLen}`), ipv6: r.ipv6.map((a) => `${a.ip}/${a.prefixLen}`), messages: r.messages });
      return;
    }
    case 'assign-ip': {
      const { values: v } = parse(cmd, argv, { host: { type: 'string' }, ip: { type: 'string' }, handle: { type: 'string' } });
      const a = await ipam.assignIP({ host: required(cmd, v, 'host'), ip: required(cmd, v, 'ip'), handle: v.handle });
      printJson({ ip: `${a.ip}/${a.prefixLen}`, pool: a.pool, block: a.block });
      return;
    }
    case 'release': {
      const { values: v } = parse(cmd, argv, { ip: { type: 'string', multiple: true }, handle: { type: 'string' } });
      if (v.handle !== undefined && v.ip) throw new CliError('release: give either --ip or --handle, not both');
      if (v.handle !== undefined) printJson({ released: await ipam.releaseByHandle(v.handle), notAllocated: [] });
      else if (v.ip && v.ip.length) printJson(await ipam.releaseIPs(v.ip));
      else throw new CliError('release: --ip or --handle is required');
      return;
    }
    case 'claim': {
      const { values: v } = parse(cmd, argv, { host: { type: 'string' }, cidr: { type: 'string' } });
      printJson(await ipam.claimAffinity(required(cmd, v, 'cidr'), required(cmd, v, 'host')));
      return;
    }
    case 'release-affinity': {
      const { values: v } = parse(cmd, argv, { host: { type: 'string' }, cidr: { type: 'string' }, 'require-empty': { type: 'boolean' } });
      printJson(await ipam.releaseAffinity(required(cmd, v, 'cidr'), required(cmd, v, 'host'), { requireEmpty: v['require-empty'] ?? false }));
      return;
    }
    case 'blocks': {
      const { values: v } = parse(cmd, argv, { host: { type: 'string' } });
      printJson(await ipam.blocks(v.host));
      return;
    }
    case 'routes': {
      const { values: v } = parse(cmd, argv, { host: { type: 'string' } });
      printJson(await ipam.routes(required(cmd, v, 'host')));
      return;
    }
    case 'check': {
      parse(cmd, argv, {});
      if (ipam.ds.layout.name !== 'calico') throw new CliError('ipam check verifies a Calico-layout datastore: use --layout calico (or --store calico+etcd://...)');
      const report = await checkCalico(ipam.store);
      printJson(report);
      return report.problems.length ? 1 : 0;
    }
    default:
      throw new CliError(`ipam: unknown command "${cmd}" (see blockspeaker ipam --help)`);
  }
}

const ETCD_FLAGS = {
  '--etcd-ca': 'ca', '--etcd-cert': 'cert', '--etcd-key': 'key', '--etcd-user': 'username',
  '--etcd-password-file': 'passwordFile', '--etcd-password-env': 'passwordEnv',
} as const;

/** --etcd-* options (anywhere in argv), each over its BLOCKSPEAKER_ETCD_* variable; the rest of argv untouched. */
export function etcdSecurityOptions(argv: string[], env: NodeJS.ProcessEnv = process.env): { security: EtcdSecurity | undefined; rest: string[] } {
  const flags: Partial<Record<(typeof ETCD_FLAGS)[keyof typeof ETCD_FLAGS], string>> = {};
  const rest: string[] = [];
  let allowInsecure = env.BLOCKSPEAKER_ETCD_ALLOW_INSECURE === '1' || env.BLOCKSPEAKER_ETCD_ALLOW_INSECURE === 'true';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--etcd-allow-insecure') {
      allowInsecure = true;
      continue;
    }
    const eq = a.indexOf('=');
    const flag = (eq > 0 ? a.slice(0, eq) : a) as keyof typeof ETCD_FLAGS;
    if (!(flag in ETCD_FLAGS)) {
      rest.push(a);
      continue;
    }
    const value = eq > 0 ? a.slice(eq + 1) : argv[++i];
    if (value === undefined || value === '') throw new CliError(`${flag} needs a value`);
    flags[ETCD_FLAGS[flag]] = value;
  }
  if (flags.passwordFile && flags.passwordEnv) throw new CliError('--etcd-password-file and --etcd-password-env: give one');
  const s: EtcdSecurity = {};
  const ca = flags.ca ?? env.BLOCKSPEAKER_ETCD_CA;
  const cert = flags.cert ?? env.BLOCKSPEAKER_ETCD_CERT;
  const key = flags.key ?? env.BLOCKSPEAKER_ETCD_KEY;
  const username = flags.username ?? env.BLOCKSPEAKER_ETCD_USER;
  if (ca) s.ca = ca;
  if (cert) s.cert = cert;
  if (key) s.key = key;
  if (username) s.username = username;
  if (flags.passwordFile) s.password = { file: flags.passwordFile };
  else if (flags.passwordEnv) s.password = { env: flags.passwordEnv };
  else if (env.BLOCKSPEAKER_ETCD_PASSWORD_FILE) s.password = { file: env.BLOCKSPEAKER_ETCD_PASSWORD_FILE };
  else if (env.BLOCKSPEAKER_ETCD_PASSWORD) s.password = { env: 'BLOCKSPEAKER_ETCD_PASSWORD' };
  if (allowInsecure && Object.keys(s).length) s.allowInsecure = true;
  return { security: Object.keys(s).length ? s : undefined, rest };
}

export async function run(argv: string[]): Promise<number> {
  // --daemon / --socket PATH: assign/release through the running daemon's control socket instead of the store.
  if (argv.some((a) => a === '--daemon' || a === '--socket' || a.startsWith('--socket='))) return (await import('./show.ts')).ipamViaDaemon(argv);
  // Global options come before the command words: --store DIR (or BLOCKSPEAKER_STORE), --json (the default).
  let store = process.env.BLOCKSPEAKER_STORE;
  const { security, rest: afterEtcd } = etcdSecurityOptions(argv);
  argv = afterEtcd;
  let layout: string | undefined;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--store') store = argv[++i];
    else if (a.startsWith('--store=')) store = a.slice(8);
    else if (a === '--layout') layout = argv[++i];
    else if (a.startsWith('--layout=')) layout = a.slice(9);
    else if (a === '--json') continue;
    else if (a === '--help' || a === '-h') {
      process.stdout.write(HELP);
      return 0;
    } else rest.push(a);
  }
  const words: string[] = [];
  while (rest.length && !rest[0].startsWith('-')) words.push(rest.shift()!);
  if (words.length === 0) throw new CliError('ipam: a command is required (see blockspeaker ipam --help)');
  if (!store) throw new CliError('ipam: --store DIR is required (or set BLOCKSPEAKER_STORE)');
  // calico+etcd://... is the calico layout on that etcd.
  if (store.startsWith('calico+')) [store, layout] = [store.slice(7), layout ?? 'calico'];
  if (layout !== undefined && layout !== 'blockspeaker' && layout !== 'calico') throw new CliError(`--layout must be blockspeaker or calico, got "${layout}"`);
  if (words.join(' ') === 'migrate') return migrate(store, rest, layout ?? 'blockspeaker', security);
  const ipam = new Ipam(await openStore(store, { security }), { layout: layoutByName(layout) });
  try {
    return (await dispatch(ipam, words, rest)) ?? 0;
  } finally {
    await ipam.store.close();
  }
}

async function migrate(fromSpec: string, argv: string[], fromLayout: string, security: EtcdSecurity | undefined): Promise<number> {
  const { values: v } = parse('migrate', argv, { to: { type: 'string' }, force: { type: 'boolean' }, 'to-layout': { type: 'string' } });
  let toSpec = required('migrate', v, 'to');
  let toLayout = v['to-layout'];
  if (toSpec.startsWith('calico+')) [toSpec, toLayout] = [toSpec.slice(7), toLayout ?? 'calico'];
  toLayout ??= fromLayout;
  if (toSpec === fromSpec && toLayout === fromLayout) throw new CliError('migrate: --to is the same store as --store');
  if (toLayout !== fromLayout && v.force) throw new CliError('migrate: --force is not offered between layouts (the target must not hold any of the keys written)');
  // The etcd options belong to whichever side is etcd (both, when both are: one etcd's credentials).
  const from = await openStore(fromSpec, { security: isEtcdUrl(fromSpec) ? security : undefined });
  try {
    const to = toSpec === fromSpec ? from : await openStore(toSpec, { security: isEtcdUrl(toSpec) ? security : undefined });
    try {
      if (toLayout !== fromLayout) {
        printJson(await migrateLayout({ store: from, layout: layoutByName(fromLayout) }, { store: to, layout: layoutByName(toLayout) }));
        return 0;
      }
      printJson(await migrateStore(from, to, { force: v.force ?? false }));
    } finally {
      if (to !== from) await to.close();
    }
  } finally {
    await from.close();
  }
  return 0;
}
