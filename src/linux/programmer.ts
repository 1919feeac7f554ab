// The ip(8) adapter: reads our routing table and applies planned route ops through `ip -batch`.
//
// One `ip -batch -` process applies any number of ops (each is one netlink request and reply inside it), which is
// what makes 100,000 routes take seconds instead of the minutes a process per route takes. The batch runs with
// -force: without it ip stops at the first failing line and the rest is silently not applied; with it every line
// runs and every failure is still reported on stderr as "<message>\nCommand failed -:<line>", which is parsed here
// back into the op that failed. `netns` runs everything inside a network namespace (`ip -n NS`).
import { spawn } from 'node:child_process';
import type { RouteOp } from './planner.ts';
import { type ParsedRoutes, parseIpRouteJson } from './parse.ts';
import { type KernelRoute, type Owner, describeRoute, routeDelLine, routeSetLine } from './route.ts';

export interface CommandResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a program with optional stdin; never rejects for a non-zero exit (only when it cannot start). */
export type CommandRunner = (file: string, args: readonly string[], stdin?: string) => Promise<CommandResult>;

/** A hung ip (a stuck netlink socket) must not stall the loop forever; 100k routes take seconds. */
const IP_TIMEOUT_MS = 300_000;

export const spawnRunner: CommandRunner = (file, args, stdin) =>
  new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['pipe', 'pipe', 'pipe'], timeout: IP_TIMEOUT_MS });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    // ip exits early on some errors (bad netns): ignore EPIPE on the input, the exit status tells the story.
    child.stdin.on('error', () => {});
    child.on('close', (code, signal) =>
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
    child.stdin.end(stdin ?? '');
  });

export interface IpRouteProgrammerOptions extends Owner {
  /** Network namespace name (as for `ip -n`); absent = the namespace this process runs in. */
  netns?: string;
  /** Path of the ip binary (default "ip" from PATH). */
  ip?: string;
  /** For tests: how commands run. */
  runner?: CommandRunner;
  /**
   * Manage the policy rules that make a dedicated table (not 254) take effect, at this priority and the next:
   *   P:   lookup main suppress_prefixlength 0   (main wins, except its default route: pod /32s beat our blackholes)
   *   P+1: lookup TABLE
   * both tagged with our protocol, for IPv4 and IPv6. Absent = rules are the operator's business.
   */
  rulePriority?: number;
}

/** One policy rule we own: all sources, one table, optionally suppressing that table's short prefixes. */
export interface RuleSpec {
  priority: number;
  table: number;
  suppressPrefixlen?: number;
}

interface IpJsonRule {
  priority?: number;
  src?: string;
  table?: string;
  suppress_prefixlen?: number;
  protocol?: string;
  [k: string]: unknown;
}

const MAIN_TABLE = 254;

/** The rules that route into a dedicated `table` without letting it shadow more specific routes in main. */
export function tableRules(table: number, priority: number): RuleSpec[] {
  return [{ priority, table: MAIN_TABLE, suppressPrefixlen: 0 }, { priority: priority + 1, table }];
}

const RULE_KEYS = new Set(['priority', 'src', 'table', 'suppress_prefixlen', 'protocol', 'flags']);

function ruleMatches(r: IpJsonRule, s: RuleSpec): boolean {
  return r.priority === s.priority && r.src === 'all' && r.table === String(s.table)
    && r.suppress_prefixlen === s.suppressPrefixlen
    // Any other selector (iif, fwmark, dst, ...) makes it a different rule.
    && Object.keys(r).every((k) => RULE_KEYS.has(k));
}

function ruleArgs(s: RuleSpec): string[] {
  const a = ['pref', String(s.priority), 'lookup', String(s.table)];
  if (s.suppressPrefixlen !== undefined) a.push('suppress_prefixlength', String(s.suppressPrefixlen));
  return a;
}

export interface OpFailure {
  op: RouteOp;
  /** The batch line, as sent. */
  line: string;
  /** What ip printed for it ("RTNETLINK answers: File exists", "Error: Nexthop has invalid gateway."). */
  error: string;
}

export interface ApplyResult {
  /** Ops sent. */
  attempted: number;
  failed: OpFailure[];
}

export interface ReadResult {
  routes: KernelRoute[];
  /** Table entries ip printed that we could not parse (reported, never touched). */
  unparsed: ParsedRoutes['unparsed'];
}

/** ip itself failed (could not start, bad namespace, unreadable output), as opposed to a route being refused. */
export class IpCommandError extends Error {
  override name = 'IpCommandError';
}

/** The text of one op as an `ip -batch` line. */
export function opLine(o: RouteOp): string {
  return o.op === 'delete' ? routeDelLine(o.route) : routeSetLine(o.op, o.route);
}

const FAILED_RE = /^Command failed (.*):(\d+)$/;

/**
 * Pair ip -batch's stderr with its input lines: each failure is the message lines followed by
 * "Command failed -:N". Returns line number (1-based) -> message.
 */
export function parseBatchErrors(stderr: string): Map<number, string> {
  const out = new Map<number, string>();
  let msg: string[] = [];
  for (const raw of stderr.split('\n')) {
    const line = raw.trimEnd();
    if (line === '') continue;
    const m = FAILED_RE.exec(line);
    if (m) {
      out.set(Number(m[2]), msg.join('; ') || 'failed');
      msg = [];
    } else msg.push(line);
  }
  return out;
}

export class IpRouteProgrammer {
  readonly owner: Owner;
  private readonly base: string[];
  private readonly ip: string;
  private readonly run: CommandRunner;
  private readonly rules: RuleSpec[];

  constructor(opts: IpRouteProgrammerOptions) {
    this.owner = { table: opts.table, protocol: opts.protocol };
    const p = opts.rulePriority;
    if (p !== undefined && (!Number.isInteger(p) || p < 1 || p > 32764)) {
      throw new RangeError(`rulePriority ${p}: must be 1..32764 (it and the next go before main at 32766)`);
    }
    if (p !== undefined && opts.table === MAIN_TABLE) throw new RangeError('rulePriority needs a table other than main');
    this.rules = p === undefined ? [] : tableRules(opts.table, p);
    this.base = opts.netns !== undefined ? ['-n', opts.netns] : [];
    this.ip = opts.ip ?? 'ip';
    this.run = opts.runner ?? spawnRunner;
  }

  /** Every route in our table, both families, whatever its protocol (the planner needs foreign keys too). */
  async read(): Promise<ReadResult> {
    const [v4, v6] = await Promise.all([this.readFamily(4), this.readFamily(6)]);
    return { routes: [...v4.routes, ...v6.routes], unparsed: [...v4.unparsed, ...v6.unparsed] };
  }

  private async readFamily(family: 4 | 6): Promise<ParsedRoutes> {
    const args = [...this.base, '-N', '-j', `-${family}`, 'route', 'show', 'table', String(this.owner.table)];
    const r = await this.exec(args);
    // The kernel creates a table with its first route and strict dumps of a table that never had one fail.
    if (r.code !== 0 && /FIB table does not exist/.test(r.stderr)) return { routes: [], unparsed: [] };
    if (r.code !== 0) throw new IpCommandError(`ip ${args.join(' ')}: ${oneLine(r)}`);
    try {
      return parseIpRouteJson(r.stdout, family, this.owner.table);
    } catch (err) {
      throw new IpCommandError(`ip ${args.join(' ')}: unreadable output: ${(err as Error).message}`);
    }
  }

  /** Called before each reconcile: keeps our policy rules in place (when configured). */
  async prepare(): Promise<void> {
    if (this.rules.length > 0) await this.ensureRules();
  }

  /**
   * Make our policy rules exactly `rules` for both families: add the missing ones, delete rules with our protocol
   * that are not wanted (an old priority or table). Rules of other protocols are never touched. Returns the changes.
   */
  async ensureRules(rules: readonly RuleSpec[] = this.rules): Promise<string[]> {
    const done: string[] = [];
    const proto = String(this.owner.protocol);
    for (const family of [4, 6] as const) {
      const show = [...this.base, '-N', '-j', `-${family}`, 'rule', 'show'];
      const r = await this.exec(show);
      if (r.code !== 0) throw new IpCommandError(`ip ${show.join(' ')}: ${oneLine(r)}`);
      let have: IpJsonRule[];
      try {
        have = JSON.parse(r.stdout.trim() || '[]') as IpJsonRule[];
      } catch (err) {
        throw new IpCommandError(`ip ${show.join(' ')}: unreadable output: ${(err as Error).message}`);
      }
      const ours = have.filter((x) => x.protocol === proto);
      for (const x of ours) {
        if (rules.some((s) => ruleMatches(x, s))) continue;
        const args = [...this.base, `-${family}`, 'rule', 'del', 'pref', String(x.priority), 'proto', proto];
        if (x.table !== undefined) args.push('lookup', x.table);
        await this.must(args);
        done.push(`del ${args.slice(this.base.length).join(' ')}`);
      }
      for (const s of rules) {
        if (ours.some((x) => ruleMatches(x, s))) continue;
        const args = [...this.base, `-${family}`, 'rule', 'add', ...ruleArgs(s), 'proto', proto];
        await this.must(args);
        done.push(`add ${args.slice(this.base.length).join(' ')}`);
      }
    }
    return done;
  }

  private async must(args: string[]): Promise<void> {
    const r = await this.exec(args);
    if (r.code !== 0) throw new IpCommandError(`ip ${args.join(' ')}: ${oneLine(r)}`);
  }

  /** Apply ops in one ip -batch process; per-op failures come back in the result, ip's own failures throw. */
  async apply(ops: readonly RouteOp[]): Promise<ApplyResult> {
    if (ops.length === 0) return { attempted: 0, failed: [] };
    const lines = ops.map(opLine);
    const args = [...this.base, '-force', '-batch', '-'];
    const r = await this.exec(args, lines.join('\n') + '\n');
    const errors = parseBatchErrors(r.stderr);
    // Killed part-way, the lines after the last report are in an unknown state: fail the whole run.
    if (r.signal !== null || (r.code !== 0 && errors.size === 0)) throw new IpCommandError(`ip ${args.join(' ')}: ${oneLine(r)}`);
    const failed: OpFailure[] = []; // in line order: ip reports failures as it goes
    for (const [n, error] of errors) {
      const i = n - 1;
      if (i < 0 || i >= ops.length) continue;
      failed.push({ op: ops[i], line: lines[i], error });
    }
    return { attempted: ops.length, failed };
  }

  private async exec(args: string[], stdin?: string): Promise<CommandResult> {
    try {
      return await this.run(this.ip, args, stdin);
    } catch (err) {
      throw new IpCommandError(`cannot run ${this.ip}: ${(err as Error).message}`);
    }
  }
}

function oneLine(r: CommandResult): string {
  const text = r.stderr.trim().split('\n').slice(0, 3).join('; ');
  return `${r.signal ? `killed by ${r.signal}` : `exit ${r.code}`}${text ? `: ${text}` : ''}`;
}

/** A failure as one line for logs and status. */
export const describeFailure = (f: OpFailure): string => `${f.op.op} ${describeRoute(f.op.route)}: ${f.error}`;
