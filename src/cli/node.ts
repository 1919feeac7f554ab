// `blockspeaker node --store S list | delete NAME`: the cluster's node registry. A node leaves the cluster (and every
// other node's mesh) only by this explicit delete: registrations never expire.
import { calicoNodeLayout, ourNodeLayout } from '../cluster/node.ts';
import { NodeRegistry } from '../cluster/registry.ts';
import { openStore } from '../store/open.ts';
import { CliError, parse, printJson, required } from './args.ts';

const HELP = `usage: blockspeaker node --store DIR|etcd://HOST:PORT[,...] [--layout blockspeaker|calico] <command>

commands:
  list            every registered node (name, labels, BGP addresses, AS, route-reflector cluster ID), as JSON
  delete NAME     remove a node: the others drop their mesh sessions to it
`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parse('node', argv, {
    store: { type: 'string' }, layout: { type: 'string' }, help: { type: 'boolean', short: 'h' },
  }, true);
  if (values.help || positionals.length === 0) {
    process.stdout.write(HELP);
    return values.help ? 0 : 2;
  }
  const layoutName = values.layout ?? 'blockspeaker';
  if (layoutName !== 'blockspeaker' && layoutName !== 'calico') throw new CliError(`node: --layout must be blockspeaker or calico, got "${layoutName}"`);
  const store = await openStore(required('node', values, 'store'));
  try {
    const reg = new NodeRegistry(store, { layout: layoutName === 'calico' ? calicoNodeLayout : ourNodeLayout,
      onBadNode: (key, err) => process.stderr.write(`blockspeaker: node ${key} skipped: ${err.message}\n`) });
    const [cmd, ...rest] = positionals;
    if (cmd === 'list' && rest.length === 0) {
      printJson([...(await reg.list()).values()]);
      return 0;
    }
    if (cmd === 'delete' && rest.length === 1) {
      if (!(await reg.remove(rest[0]))) throw new CliError(`node delete: no node named "${rest[0]}"`);
      printJson({ deleted: rest[0] });
      return 0;
    }
    throw new CliError(`node: unknown command "${positionals.join(' ')}" (list | delete NAME)`);
  } finally {
    await store.close();
  }
}
