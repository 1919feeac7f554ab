// node.bgp: the node's BGP identity as Calico's Node resource spells it (spec.bgp), and bgp.nodeToNodeMeshEnabled.
import { checkNode, ClusterError } from '../calico/node-bgp.ts';
import type { Checker, Path } from './check.ts';
import type { NodeBgpConfig } from './types.ts';

const NODE_BGP_FIELDS = ['ipv4Address', 'ipv6Address', 'asNumber', 'routeReflectorClusterID'] as const;

export function nodeBgpSection(c: Checker, path: Path, v: unknown): NodeBgpConfig | undefined {
  const o = c.object(path, v, NODE_BGP_FIELDS);
  if (!o) return undefined;
  const out: NodeBgpConfig = {};
  let ok = true;
  for (const f of NODE_BGP_FIELDS) {
    if (o[f] === undefined || o[f] === null) continue;
    // One validator for the file and the store: checkNode, field by field, so each error names its own field.
    try {
      const n = checkNode({ name: 'x', labels: {}, [f]: o[f] }, '');
      (out as Record<string, unknown>)[f] = n[f];
    } catch (e) {
      ok = false;
      const msg = e instanceof ClusterError ? e.message.replace(/^: bgp\.\w+: /, '') : String(e);
      c.fail([...path, f], `must be ${msg}`);
    }
  }
  return ok ? out : undefined;
}
