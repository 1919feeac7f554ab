// `blockspeaker top`: the status page's view in a terminal, redrawn every second from the daemon's control socket
// (method show.overview), for a node without a browser. ANSI only, no dependency. --once prints one frame.
import type { Overview } from '../daemon/overview.ts';
import { CliError, intOption, parse } from './args.ts';
import { ask, common, duration } from './show.ts';

const HELP = `usage: blockspeaker top [--socket PATH | -c FILE] [--once] [--interval SECONDS] [--no-color]

  The node, its BGP peers, pools, this node's blocks (with utilisation bars), borrowed addresses, the dataplane's
  last run and the warnings, redrawn every --interval seconds (default 1). q or Ctrl-C quits.
  --once     print one frame and exit (no screen control; exit 1 when the daemon cannot be reached)
  --no-color no colours (also when NO_COLOR is set or the output is not a terminal)
`;

export interface FrameOptions {
  color: boolean;
  /** The time printed in the header (default the snapshot's). */
  now?: Date;
}

type Cell = string | number | null | undefined | { text: string | number | null | undefined; color: keyof typeof SGR };

const SGR = { bold: '1', dim: '2', red: '31', green: '32', yellow: '33', cyan: '36' } as const;

/**
 * Nothing from the daemon (peer error texts, config values, store names) may move the cursor or recolour the
 * terminal: control characters are shown as "?".
 */
export function clean(v: unknown): string {
  return (v === null || v === undefined ? '-' : String(v)).replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
}

function paint(text: string, color: keyof typeof SGR | undefined, on: boolean): string {
  return on && color ? `\x1b[${SGR[color]}m${text}\x1b[0m` : text;
}

/** Columns padded to their widest cell; colours do not count toward the width. */
function grid(head: string[], rows: Cell[][], color: boolean): string[] {
  const cells = rows.map((r) => r.map((c) => (c !== null && typeof c === 'object' ? { text: clean(c.text), color: c.color } : { text: clean(c), color: undefined })));
  const w = head.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]?.text.length ?? 0)));
  const line = (r: { text: string; color?: keyof typeof SGR }[]) =>
    r.map((c, i) => paint(i === r.length - 1 ? c.text : c.text.padEnd(w[i]), c.color, color)).join('  ').trimEnd();
  return [paint(head.map((h, i) => (i === head.length - 1 ? h : h.padEnd(w[i]))).join('  '), 'dim', color), ...cells.map(line)];
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** [####==......]: allocated #, reserved =, free . */
export function textBar(allocated: number, reserved: number, size: number, width = 20): string {
  if (size <= 0) return `[${' '.repeat(width)}]`;
  const a = Math.round((allocated / size) * width);
  const r = Math.min(width - a, Math.round((reserved / size) * width));
  return `[${'#'.repeat(a)}${'='.repeat(r)}${'.'.repeat(width - a - r)}]`;
}

function grText(p: Overview['peers'][number]): string {
  const gr = p.capabilities?.gracefulRestart;
  const parts: string[] = [];
  if (p.prefixes.stale > 0) parts.push(`helping: ${p.prefixes.stale} stale`);
  if (gr) parts.push(`${gr.restarting ? 'peer restarted, ' : ''}on (${gr.restartTime} s)`);
  else if (p.state === 'Established') parts.push('off');
  return parts.length ? parts.join('; ') : '-';
}

/** Mesh/reflector marks from whatever the peer entry says about its role (fields other parts add). */
function roles(p: object): string {
  const x = p as Record<string, unknown>;
  const out = new Set<string>();
  if (typeof x.role === 'string' && x.role) out.add(x.role);
  if (x.mesh === true || x.source === 'mesh' || x.origin === 'mesh') out.add('mesh');
  if (x.routeReflectorClient === true || x.rrClient === true) out.add('reflector client');
  if (x.routeReflector === true || x.reflector === true) out.add('reflector');
  return [...out].join(',');
}

/** One screen of `top`, as lines of text. */
export function renderFrame(o: Overview, opts: FrameOptions): string {
  const c = opts.color;
  const n = o.node;
  const title = (s: string) => paint(s, 'bold', c);
  const out: string[] = [];
  const ready = n.ready ? paint('READY', 'green', c) : paint(`NOT READY (waiting for ${n.notReady.join(', ') || '?'})`, 'red', c);
  out.push(`${title(`blockspeaker ${clean(n.name)}`)}  ${clean(n.os)}  AS ${clean(n.asn)}  router-id ${clean(n.routerId)}  up ${duration(n.uptime)}  ` +
    `${ready}  routes ${o.routes}  ${(opts.now ?? new Date(o.at)).toISOString().slice(11, 19)}`);
  out.push('', title('PEERS'));
  if (!o.peers.length) out.push('  no BGP peers configured');
  else {
    out.push(...grid(['PEER', 'ASN', 'STATE', 'UP', 'RECV', 'ACC', 'SENT', 'GR', 'LAST ERROR'], o.peers.map((p) => {
      const r = roles(p);
      return [`${p.address}${r ? ` [${r}]` : ''}`, p.asn, { text: p.state, color: p.state === 'Established' ? 'green' : 'red' },
        duration(p.uptime), p.prefixes.received, p.prefixes.accepted, p.prefixes.sent, grText(p),
        p.lastError ? { text: p.lastError, color: 'yellow' } : '-'];
    }), c).map((l) => `  ${l}`));
  }
  if (!o.ipam) out.push('', title('IPAM'), '  no ipam section in the config');
  else {
    out.push('', title('POOLS'));
    out.push(...(o.ipam.pools.length ? grid(['POOL', 'CIDR', 'BLOCK', 'BLOCKS', 'ALLOC', 'FREE', 'RESV', 'USED'], o.ipam.pools.map((p) =>
      [p.disabled ? `${p.name} (disabled)` : p.name, p.cidr, `/${p.blockSize}`, p.blocks, p.allocated, p.free, p.reserved,
        `${textBar(p.allocated, p.reserved, p.size)} ${pct(p.utilisation)}`]), c) : ['no pools']).map((l) => `  ${l}`));
    out.push('', title(`BLOCKS OF ${clean(n.name)}`) + paint('  (# allocated, = reserved, . free)', 'dim', c));
    out.push(...(o.ipam.blocks.length ? grid(['BLOCK', 'POOL', 'USE', 'ALLOC', 'FREE', 'RESV', 'USED'], o.ipam.blocks.map((b) =>
      [b.cidr, b.pool, textBar(b.allocated, b.reserved, b.size), b.allocated, b.free, b.reserved, pct(b.utilisation)]), c)
      : ['no blocks yet']).map((l) => `  ${l}`));
    if (o.ipam.borrowed.length) {
      out.push('', title('BORROWED'));
      out.push(...grid(['ADDRESS', 'BLOCK', 'FROM'], o.ipam.borrowed.map((b) => [b.address, b.block, b.from]), c).map((l) => `  ${l}`));
    }
  }
  const dp = (o.dataplane ?? {}) as Record<string, unknown>;
  out.push('', title('DATAPLANE'));
  const scalars = Object.entries(dp).filter(([k, v]) => k !== 'lastError' && (v === null || typeof v !== 'object'));
  out.push(`  ${scalars.map(([k, v]) => `${k} ${clean(v)}`).join('  ')}`);
  if (dp.lastPlan && typeof dp.lastPlan === 'object') out.push(`  last plan ${clean(JSON.stringify(dp.lastPlan))}`);
  if (dp.lastError) out.push(`  ${paint(`last error ${clean(typeof dp.lastError === 'string' ? dp.lastError : JSON.stringify(dp.lastError))}`, 'red', c)}`);
  out.push('', title('WARNINGS'));
  // One entry per key with its count (a daemon before that sends a list of strings).
  const ws = o.warnings as Overview['warnings'] | string[];
  const entries = Array.isArray(ws) ? ws.map((message) => ({ message, count: 1 })) : ws.entries;
  out.push(...(entries.length ? entries.map((w) => `  ${paint(clean(w.message), 'yellow', c)}${w.count > 1 ? paint(` (seen ${w.count} times)`, 'dim', c) : ''}`) : ['  none']));
  if (!Array.isArray(ws) && ws.evicted > 0) out.push(`  ${paint(`(${ws.evicted} older warnings dropped to keep the list at ${ws.limit})`, 'dim', c)}`);
  return out.join('\n') + '\n';
}

export async function run(argv: string[]): Promise<number> {
  const cm = common(argv);
  if (cm.help) return process.stdout.write(HELP), 0;
  const { values: v } = parse('top', cm.rest, { once: { type: 'boolean' }, interval: { type: 'string' }, 'no-color': { type: 'boolean' } });
  const interval = intOption('top', 'interval', v.interval, 1, 3600) ?? 1;
  const tty = !!process.stdout.isTTY;
  const color = !v['no-color'] && !process.env.NO_COLOR && tty;
  if (v.once) {
    const o = await ask<Overview>(cm.socket, 'show.overview');
    process.stdout.write(renderFrame(o, { color }));
    return 0;
  }
  if (!tty) throw new CliError('top: the output is not a terminal; use --once (or show --json) for a single snapshot');
  return loop(cm.socket, interval * 1000, color);
}

/** Redraw until q / Ctrl-C; an unreachable daemon is shown on screen and retried, not fatal. */
async function loop(socket: string, everyMs: number, color: boolean): Promise<number> {
  const out = process.stdout;
  out.write('\x1b[?1049h\x1b[?25l'); // alternate screen, cursor hidden
  let done: (code: number) => void = () => undefined;
  const finished = new Promise<number>((r) => (done = r));
  const restore = () => out.write('\x1b[?25h\x1b[?1049l');
  const quit = (code: number) => {
    clearTimeout(timer);
    if (process.stdin.isTTY) process.stdin.setRawMode(false);
    process.stdin.pause();
    restore();
    done(code);
  };
  if (process.stdin.isTTY) {
    process.stdin.setRawMode(true);
    process.stdin.resume();
    process.stdin.on('data', (d: Buffer) => {
      const k = d.toString();
      if (k === 'q' || k === 'Q' || k === '\u0003' || k === '\u001b') quit(0);
    });
  }
  process.once('SIGINT', () => quit(0));
  process.once('SIGTERM', () => quit(0));
  let timer: NodeJS.Timeout | undefined;
  const tick = async () => {
    let frame: string;
    try {
      frame = renderFrame(await ask<Overview>(socket, 'show.overview'), { color });
    } catch (e) {
      frame = `${paint('blockspeaker top', 'bold', color)}\n\n  ${paint(clean((e as Error).message), 'red', color)}\n  retrying every ${everyMs / 1000} s\n`;
    }
    out.write(`\x1b[H\x1b[2J${frame}${paint('q quits', 'dim', color)}`);
    timer = setTimeout(() => void tick(), everyMs);
  };
  await tick();
  return finished;
}
