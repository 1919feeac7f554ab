// What the Calico importer does with every spec field of every kind it reads. The list is Calico's current API
// (fixtures/calico/v3-spec-fields.json, taken from the Go types); a test checks both agree and that docs/reference/calico-fields.md's table
// says the same, so a field Calico adds cannot be dropped silently: an unknown field is refused.
//   honoured: mapped onto blockspeaker's config.   warned: accepted with a warning that says why it has no effect.
//   refused: an error (the file is not applied).
export type Treatment = 'honoured' | 'warned' | 'refused';

export interface FieldRule {
  treatment: Treatment;
  /** For warned/refused: the reason, shown in the message. For honoured: what it becomes. */
  note: string;
  /** warned only: values that mean "off"/default and need no warning. */
  quietWhen?: unknown[];
}

const h = (note: string): FieldRule => ({ treatment: 'honoured', note });
const w = (note: string, quietWhen?: unknown[]): FieldRule => ({ treatment: 'warned', note, quietWhen });

export const CALICO_FIELDS: Record<string, Record<string, FieldRule>> = {
  IPPool: {
    cidr: h('pool cidr'),
    blockSize: h('pool blockSize'),
    nodeSelector: h('pool nodeSelector (full selector grammar)'),
    disabled: h('pool disabled'),
    natOutgoing: h('pool natOutgoing (recorded on allocations)'),
    disableBGPExport: h('pool disableBGPExport'),
    allowedUses: h('pool allowedUses'),
    assignmentMode: h('Automatic: as is; Manual: nodeSelector "!all()", so the pool is used only when requested by name'),
    ipipMode: w('blockspeaker routes natively over BGP; no IPIP tunnel', ['Never']),
    vxlanMode: w('blockspeaker routes natively over BGP; no VXLAN tunnel', ['Never']),
    namespaceSelector: w('IPAM requests carry no namespace: the pool serves every namespace', ['', 'all()']),
  },
  BGPPeer: {
    node: h('the peering applies only to the named node'),
    nodeSelector: h('the peering applies only to nodes the selector matches'),
    peerIP: h('peer address and port'),
    asNumber: h('peer asn'),
    peerSelector: h('peers with every registered node the selector matches (route reflectors and their clients)'),
    sourceAddress: h('UseNodeIP (default): connect from node.bgp\'s address of the family; None: the OS picks'),
    keepaliveTime: h('holdTime = 3 x keepaliveTime (keepalives go every holdTime/3)'),
    maxRestartTime: h('peer gracefulRestart.restartTime'),
    nextHopMode: h('Self: next hop self toward the peer; Auto and Keep: our default (kept toward iBGP, self toward eBGP)'),
    keepOriginalNextHop: h('deprecated form of nextHopMode: Keep'),
    filters: h('BGPFilter rules become the peer\'s import/export prefix lists'),
    localASNumber: h('peer localAsn: our AS in the OPEN toward this peer, eBGP/iBGP decided against it'),
    numAllowedLocalASNumbers: h('peer allowAsIn: routes with our AS in the AS_PATH up to N times are accepted'),
    password: h('peer password: secretKeyRef {name, key} is read from the mounted Secret file /etc/blockspeaker/secrets/NAME/KEY (TCP-MD5, Linux; refused on Windows)'),
    ttlSecurity: h('peer ttlSecurity (GTSM hops; 0 = off; Linux; refused on Windows)'),
    reachableBy: w('no static route to the peer is installed; the route table must reach it'),
    localWorkloadSelector: w('peering with local workloads is not implemented', ['']),
    reversePeering: w('peering is always symmetric here (as Auto)', ['Auto']),
  },
  BGPConfiguration: {
    asNumber: h('the default AS (bgp.asn in the file wins; a warning says so when they differ)'),
    listenPort: h('bgp.listen port (the file\'s listen port wins; a warning says so when they differ)'),
    nodeToNodeMeshEnabled: h('bgp.nodeToNodeMeshEnabled (the file wins when it sets it)'),
    logSeverityScreen: w('logging is set with --log-level', ['Info', 'info']),
    serviceClusterIPs: h('announced from every node (bgp.announce), shown in /status'),
    serviceExternalIPs: h('announced from every node (bgp.announce), shown in /status'),
    serviceLoadBalancerIPs: h('announced from every node (bgp.announce), shown in /status'),
    serviceLoadBalancerAggregation: w('service IP advertisement is not implemented yet', ['Enabled']),
    communities: h('named community values for prefixAdvertisements (bgp.communities)'),
    prefixAdvertisements: h('communities added to exported routes inside each cidr (bgp.prefixAdvertisements; the file\'s wins)'),
    nodeMeshPassword: h('bgp.nodeMeshPassword: TCP-MD5 on every mesh session; secretKeyRef {name, key} is read from the mounted Secret file /etc/blockspeaker/secrets/NAME/KEY (Linux; refused on Windows)'),
    nodeMeshMaxRestartTime: w('mesh sessions use bgp.gracefulRestart'),
    bindMode: w('the speaker listens on bgp.listen.address', ['None']),
    ignoredInterfaces: w('blockspeaker announces IPAM blocks only, never interface routes', [[]]),
    localWorkloadPeeringIPV4: w('peering with local workloads is not implemented', ['']),
    localWorkloadPeeringIPV6: w('peering with local workloads is not implemented', ['']),
    programClusterRoutes: w('remote routes are programmed per dataplane.kind', ['Enabled']),
    ipv4NormalRoutePriority: w('route metrics are set by the dataplane programmer'),
    ipv6NormalRoutePriority: w('route metrics are set by the dataplane programmer'),
  },
  BGPFilter: {
    exportV4: h('export prefix rules for peers naming the filter'),
    importV4: h('import prefix rules for peers naming the filter'),
    exportV6: h('export prefix rules for peers naming the filter'),
    importV6: h('import prefix rules for peers naming the filter'),
  },
  BGPFilterRule: {
    cidr: h('rule prefix'),
    prefixLength: h('rule ge/le (min/max)'),
    matchOperator: h('Equal: exactly cidr; In: within cidr (lengths from prefixLength); NotEqual, NotIn: their negations'),
    action: h('accept/reject'),
    source: h('RemotePeers: the rule matches only routes learned from BGP peers, never our own'),
    interface: w('blockspeaker exports no interface routes; a rule naming an interface matches nothing', ['']),
    peerType: h('the rule applies only toward/from peers of that type (iBGP: the peer\'s AS is our local AS)'),
    communities: h('the rule matches routes carrying the community (standard or large)'),
    asPathPrefix: h('the rule matches routes whose AS_PATH begins with these ASNs (before our AS is prepended)'),
    priority: h('the rule matches routes whose LOCAL_PREF is 2147483647 - priority (Calico\'s mapping)'),
    operations: h('addCommunity, prependASPath, setPriority (LOCAL_PREF = 2147483647 - value) applied on accept'),
  },
  IPAMConfiguration: {
    strictAffinity: h('ipam.strictAffinity'),
    maxBlocksPerHost: h('ipam.maxBlocksPerHost'),
    autoAllocateBlocks: h('ipam.autoAllocateBlocks'),
    ipCooldownSeconds: h('ipam.ipCooldownSeconds'),
    kubeVirtVMAddressPersistence: w('no KubeVirt integration', ['Disabled']),
  },
  Node: {
    bgp: h('node.bgp of the node with the same name (see NodeBGP)'),
    ipv4VXLANTunnelAddr: w('no VXLAN tunnel'),
    vxlanTunnelMACAddr: w('no VXLAN tunnel'),
    ipv6VXLANTunnelAddr: w('no VXLAN tunnel'),
    vxlanTunnelMACAddrV6: w('no VXLAN tunnel'),
    orchRefs: w('written by calico-node for Kubernetes; not needed here', [[]]),
    wireguard: w('no WireGuard'),
    addresses: w('status written by calico-node; not needed here', [[]]),
    interfaces: w('status written by calico-node; not needed here', [[]]),
  },
  NodeBGP: {
    asNumber: h('node.bgp.asNumber'),
    ipv4Address: h('node.bgp.ipv4Address'),
    ipv6Address: h('node.bgp.ipv6Address'),
    routeReflectorClusterID: h('node.bgp.routeReflectorClusterID'),
    ipv4IPIPTunnelAddr: w('no IPIP tunnel'),
  },
};
