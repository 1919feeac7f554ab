// The BGP FSM's vocabulary (./fsm.ts): states, timers, the events it takes and the actions it returns, and its
// configuration. Types only, so the session, the speaker and tests can name them without the machine itself.
export type State = 'Idle' | 'Connect' | 'Active' | 'OpenSent' | 'OpenConfirm' | 'Established';

export type TimerName = 'ConnectRetry' | 'Hold' | 'Keepalive' | 'DelayOpen' | 'IdleHold' | 'Stable' | 'SendHold';

/** The fields of a NOTIFICATION. */
export interface Notif {
  code: number;
  subcode: number;
  data?: Uint8Array;
}

export type FsmEvent =
  | { type: 'ManualStart' }
  | { type: 'ManualStop'; notification?: Notif }
  | { type: 'AutomaticStart' }
  | { type: 'ManualStart_with_PassiveTcpEstablishment' }
  | { type: 'AutomaticStart_with_PassiveTcpEstablishment' }
  | { type: 'AutomaticStop'; notification?: Notif }
  | { type: 'ConnectRetryTimer_Expires' }
  | { type: 'HoldTimer_Expires' }
  | { type: 'KeepaliveTimer_Expires' }
  | { type: 'DelayOpenTimer_Expires' }
  | { type: 'IdleHoldTimer_Expires' }
  | { type: 'StableTimer_Expires' }
  /** RFC 9687 event 29. */
  | { type: 'SendHoldTimer_Expires' }
  /** Not RFC 4271 events (RFC 9687's timer input): octets we wrote wait in the socket, not yet taken by the kernel. */
  | { type: 'WritePending' }
  /** A write reached the kernel; `pending`: octets still wait behind it. */
  | { type: 'WriteProgress'; pending: boolean }
  /** Our outgoing TCP connection completed. */
  | { type: 'Tcp_CR_Acked' }
  /** An incoming TCP connection was accepted for this FSM. */
  | { type: 'TcpConnectionConfirmed' }
  | { type: 'TcpConnectionFails'; reason?: string }
  /** A valid OPEN (the adapter checked AS, identifier, capabilities); holdTime is the peer's proposal. */
  | { type: 'BGPOpen'; holdTime: number }
  | { type: 'BGPHeaderErr'; notification: Notif }
  | { type: 'BGPOpenMsgErr'; notification: Notif }
  | { type: 'OpenCollisionDump' }
  | { type: 'NotifMsgVerErr'; notification: Notif }
  | { type: 'NotifMsg'; notification?: Notif }
  | { type: 'KeepAliveMsg' }
  | { type: 'UpdateMsg' }
  /** A malformed UPDATE (or ROUTE-REFRESH): the codec's NOTIFICATION. */
  | { type: 'UpdateMsgErr'; notification: Notif }
  /** Not an RFC 4271 event: a ROUTE-REFRESH (RFC 2918), valid only in Established. */
  | { type: 'RouteRefreshMsg' };

export type FsmEventType = FsmEvent['type'];

/** Why a session attempt ended, for the adapter (logs, graceful restart: a NOTIFICATION means no GR). */
export interface DownInfo {
  reason: string;
  /** The NOTIFICATION sent or received, if any. */
  notification: (Notif & { direction: 'sent' | 'received' }) | null;
  /** The session had been Established (routes must be dropped or kept as stale). */
  wasEstablished: boolean;
}

export type FsmAction =
  | { type: 'connect' }
  /** Drop TCP: flush what was written first, unless `abort` (the socket is stuck: destroy it now). */
  | { type: 'disconnect'; abort?: boolean }
  | { type: 'sendOpen' }
  | { type: 'sendKeepalive' }
  | { type: 'sendNotification'; code: number; subcode: number; data: Uint8Array }
  | { type: 'startTimer'; timer: TimerName; seconds: number }
  | { type: 'stopTimer'; timer: TimerName }
  /** Entered Established: the negotiated timers are in fsm.holdTime / fsm.keepaliveTime. */
  | { type: 'established' }
  /** Left a connected state for Idle or Active (the connection is gone). */
  | { type: 'down'; info: DownInfo }
  /** Hand the UPDATE being processed to the RIB. */
  | { type: 'deliverUpdate' }
  | { type: 'deliverRouteRefresh' }
  | { type: 'state'; from: State; to: State };

export interface FsmConfig {
  /** Our proposed hold time, seconds: 0 or >= 3. */
  holdTime: number;
  /** Peer hold times in 1..minHoldTime-1 are refused (Unacceptable Hold Time). Default 3 (RFC 4271: 1-2). */
  minHoldTime?: number;
  /** First ConnectRetry interval, seconds. */
  connectRetryTime: number;
  /** Cap of ConnectRetry and IdleHold, seconds. */
  connectRetryMax: number;
  /** First IdleHold interval after an error, seconds (doubles with ConnectRetryCounter). */
  idleHoldTime: number;
  /** Cap of the damping IdleHold, seconds. Default connectRetryMax. */
  idleHoldMax?: number;
  /** DelayOpen seconds; 0 = off. */
  delayOpenTime: number;
  /** Never initiate TCP. */
  passive: boolean;
  /** Restart by itself (IdleHoldTimer, then AutomaticStart) after an error. */
  autoRestart: boolean;
  /** Seconds in Established after which ConnectRetryCounter (damping) resets. Default 60. */
  stablePeriod?: number;
  /** From this many consecutive failures an incoming connection in Idle is refused until IdleHold ends. Default 3. */
  dampThreshold?: number;
  /** Hold timer while waiting for the peer's OPEN (RFC 4271 8: "4 minutes suggested"). Default 240. */
  openHoldTime?: number;
  /**
   * RFC 9687 SendHoldTime, seconds: how long octets may wait in the socket without any write reaching the kernel
   * before the session is closed (Send Hold Timer Expired). Default (absent) as the RFC recommends: the larger of
   * 8 minutes and twice the negotiated hold time. 0 = off; also off when the negotiated hold time is 0.
   */
  sendHoldTime?: number;
  /** Uniform [0, 1). */
  random: () => number;
}
