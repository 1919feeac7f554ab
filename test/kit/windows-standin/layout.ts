// Byte layouts of the IP Helper structs on x64 Windows, as the Windows SDK (and mingw-w64's netioapi.h, ws2def.h,
// ws2ipdef.h, ifdef.h) declare them. The stand-in test checks every number here against sizeof/offsetof printed by a
// mingw-compiled probe, so the koffi struct definitions in src/platform can be checked against this file.
// Offsets are from the start of the struct; nested members are written "Outer.Inner".

export interface StructLayout {
  size: number;
  align: number;
  fields: Record<string, number>;
}

export const NET_LUID: StructLayout = { size: 8, align: 8, fields: { Value: 0 } };

export const SOCKADDR_IN: StructLayout = { size: 16, align: 4, fields: { sin_family: 0, sin_port: 2, sin_addr: 4, sin_zero: 8 } };

export const SOCKADDR_IN6: StructLayout = {
  size: 28,
  align: 4,
  fields: { sin6_family: 0, sin6_port: 2, sin6_flowinfo: 4, sin6_addr: 8, sin6_scope_id: 24 },
};

/** A union: the family is the first 16 bits of either member. Addresses are in network byte order. */
export const SOCKADDR_INET: StructLayout = { size: 28, align: 4, fields: { Ipv4: 0, Ipv6: 0, si_family: 0 } };

export const IP_ADDRESS_PREFIX: StructLayout = { size: 32, align: 4, fields: { Prefix: 0, PrefixLength: 28 } };

export const MIB_IPFORWARD_ROW2: StructLayout = {
  size: 104,
  align: 8,
  fields: {
    InterfaceLuid: 0,
    InterfaceIndex: 8,
    DestinationPrefix: 12,
    'DestinationPrefix.Prefix': 12,
    'DestinationPrefix.PrefixLength': 40,
    NextHop: 44,
    SitePrefixLength: 72,
    ValidLifetime: 76,
    PreferredLifetime: 80,
    Metric: 84,
    Protocol: 88,
    Loopback: 92,
    AutoconfigureAddress: 93,
    Publish: 94,
    Immortal: 95,
    Age: 96,
    Origin: 100,
  },
};

/** NumEntries, then the rows from offset 8 (the row's 8-byte alignment pads after the ULONG). */
export const MIB_IPFORWARD_TABLE2: StructLayout = { size: 112, align: 8, fields: { NumEntries: 0, Table: 8 } };

export const MIB_IPINTERFACE_ROW: StructLayout = {
  size: 168,
  align: 8,
  fields: {
    Family: 0,
    InterfaceLuid: 8,
    InterfaceIndex: 16,
    MaxReassemblySize: 20,
    InterfaceIdentifier: 24,
    MinRouterAdvertisementInterval: 32,
    MaxRouterAdvertisementInterval: 36,
    AdvertisingEnabled: 40,
    ForwardingEnabled: 41,
    WeakHostSend: 42,
    WeakHostReceive: 43,
    UseAutomaticMetric: 44,
    UseNeighborUnreachabilityDetection: 45,
    ManagedAddressConfigurationSupported: 46,
    OtherStatefulConfigurationSupported: 47,
    AdvertiseDefaultRoute: 48,
    RouterDiscoveryBehavior: 52,
    DadTransmits: 56,
    BaseReachableTime: 60,
    RetransmitTime: 64,
    PathMtuDiscoveryTimeout: 68,
    LinkLocalAddressBehavior: 72,
    LinkLocalAddressTimeout: 76,
    /** ULONG[16] (ScopeLevelCount). */
    ZoneIndices: 80,
    /** ULONG here (UCHAR in MIB_IPFORWARD_ROW2). */
    SitePrefixLength: 144,
    Metric: 148,
    NlMtu: 152,
    Connected: 156,
    SupportsWakeUpPatterns: 157,
    SupportsNeighborDiscovery: 158,
    SupportsRouterDiscovery: 159,
    ReachableTime: 160,
    /** NL_INTERFACE_OFFLOAD_ROD: one byte of bit flags. */
    TransmitOffload: 164,
    ReceiveOffload: 165,
    DisableDefaultRoutes: 166,
  },
};

/** Every struct, by its SDK name (what the probe prints). */
export const LAYOUT: Record<string, StructLayout> = {
  NET_LUID, SOCKADDR_IN, SOCKADDR_IN6, SOCKADDR_INET, IP_ADDRESS_PREFIX, MIB_IPFORWARD_ROW2, MIB_IPFORWARD_TABLE2, MIB_IPINTERFACE_ROW,
};

/** Address families as ADDRESS_FAMILY values. */
export const AF = { UNSPEC: 0, INET: 2, INET6: 23 } as const;
