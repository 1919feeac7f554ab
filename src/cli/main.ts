// The `blockspeaker` command: dispatches to one module per subcommand group.
import { CliError } from './args.ts';
import { holdOptimizer } from '../daemon/tiering.ts';
import { setPipeOwnerLookup } from '../ipc/client.ts';
import { HOST_PLATFORM } from '../platform/paths.ts';
import { describePipeServer } from '../platform/pipe-acl.ts';

type Group = { run(argv: string[]): Promise<number> };

const groups: Record<string, { describe: string; load: () => Promise<Group> }> = {
  ipam: { describe: 'IP pools, blocks, affinities and allocations (--store DIR)', load: () => import('./ipam.ts') },
  rib: { describe: 'routing table tools (lpm)', load: () => import('./rib.ts') },
  hns: { describe: 'Windows HNS programming: plan operations from actual and desired state', load: () => import('./hns.ts') },
  run: { describe: 'run the node daemon: blockspeaker run -c FILE', load: () => import('./run.ts') },
  bgp: { describe: 'BGP tools (decode: hex messages to JSON)', load: () => import('./bgp.ts') },
  top: { describe: 'the running daemon at a glance, redrawn every second (--once: one frame)', load: () => import('./top.ts') },
  node: { describe: 'cluster nodes: node --store S list | delete NAME', load: () => import('./node.ts') },
  cni: { describe: 'CNI tools (conflist: the containerd network config list for a Windows node)', load: () => import('./cni.ts') },
  show: { describe: 'ask the running daemon: show peers | route [for ADDR] | ipam | status', load: () => import('./show.ts') },
  daemon: { describe: 'control the running daemon: daemon stop [--withdraw] | reload', load: () => import('./daemon.ts') },
  'install-cni': { describe: 'install the CNI plugin and network config list on this host (--help: where, how)', load: () => import('./install-cni.ts') },
};

function usage(): string {
  const lines = Object.entries(groups).map(([name, g]) => `  ${name.padEnd(11)} ${g.describe}`);
  return `usage: blockspeaker <command> ...\n\ncommands:\n${lines.join('\n')}\n`;
}

// A reader that goes away (`blockspeaker ... | head`) is not an error: stop quietly, as Unix tools do.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

// Windows: a control pipe that does not prove it is the daemon is refused naming its owner (process, image,
// account), read with the Win32 calls; only the CLI loads them, the CNI plugin carries no native code.
if (HOST_PLATFORM === 'win32') {
  setPipeOwnerLookup(async (endpoint) => {
    const { win32Security } = await import('../platform/win32-security.ts');
    const server = (await win32Security()).pipeServer?.(endpoint);
    return server && describePipeServer(server);
  });
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(usage());
    return cmd ? 0 : 2;
  }
  const group = groups[cmd];
  if (!group) throw new CliError(`unknown command "${cmd}" (try: ${Object.keys(groups).join(', ')})`);
  // The daemon loads its modules without the optimiser; it turns it on when BGP work starts (daemon/tiering.ts).
  if (cmd === 'run') holdOptimizer();
  return (await group.load()).run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // Bad input and known failures: one line on stderr. Anything else is a bug: show the stack.
    const e = err as Error;
    const known = e && (e instanceof CliError || ['AddressError', 'IpamError', 'StoreError', 'ConfigError', 'StartError', 'IpcError', 'IpcStartError', 'ClusterError', 'InstallCniError'].includes(e.name));
    process.stderr.write(`blockspeaker: ${known ? e.message : (e?.stack ?? String(err))}\n`);
    process.exitCode = known && e instanceof CliError ? 2 : 1;
  },
);
