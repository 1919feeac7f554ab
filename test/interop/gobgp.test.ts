// Our speaker (`blockspeaker run`) against GoBGP in network namespaces joined by veth: the scenario in suite.ts
// (sessions, routes both ways, withdrawals, IPv6, 4-octet ASNs, route refresh, graceful restart both roles, Bad
// Peer AS). Needs root and the Debian package; skips without them unless REQUIRE_PEERS=1, where that fails.
import t from 'tap';
import { interopGate } from '../kit/interop/gate.ts';
import { interopTest } from './suite.ts';

const gate = interopGate(t, ['gobgp']);
interopTest(t, 'gobgp', gate, 'blockspeaker <-> GoBGP');
