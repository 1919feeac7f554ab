// HNS facts that config validation and the planner share (one constant each, so they cannot disagree).
// No imports: src/config reads these without pulling in the planner.

/**
 * Overlay VNI (HCN's VSID / IsolationId). Windows reserves VSIDs below 4096 for its own use, and hcsshim's
 * RemoteSubnetRoutePolicySetting.IsolationId is a uint16, so the usable range is 4096..65535.
 */
export const HNS_VNI_MIN = 4096;
export const HNS_VNI_MAX = 65535;

/** RouteMetric range New-NetRoute accepts for our management vNIC routes (our metric marks them as ours). */
export const HNS_ROUTE_METRIC_MIN = 1;
export const HNS_ROUTE_METRIC_MAX = 9999;
export const HNS_DEFAULT_ROUTE_METRIC = 271;

export const HNS_MODES = ['l2bridge', 'l2tunnel', 'overlay'] as const;
export type HnsModeName = (typeof HNS_MODES)[number];

export const HNS_DEFAULT_NETWORK = 'blockspeaker';

/**
 * Ordinals of the node's first block in a pool that the addressing model uses: .1 is the gateway every block of the
 * pool shares on this node (HNS answers for it), .2 the host endpoint (`<network>_ep`). A reservation policy must
 * keep both out of pods' hands, so it must reserve at least the first HNS_FIRST_BLOCK_RESERVED ordinals there.
 */
export const HNS_GATEWAY_ORDINAL = 1;
export const HNS_HOST_ENDPOINT_ORDINAL = 2;
export const HNS_FIRST_BLOCK_RESERVED = 3;
