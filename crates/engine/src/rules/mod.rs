//! Diagnosis rules. Each rule watches one connection's segments, exchanges
//! and close, and reports [`Occurrence`]s; the engine folds them into
//! findings.
//!
//! A rule is one file: its per-connection state (a [`Rule`]), what one
//! occurrence measured (a detail struct that [`Fold`]s into the finding's
//! sums), `words` — the finding's explanation, fix and `details` — and
//! `cause`, the verdict's sentence, next to the detection they describe.
//! It is registered with one entry in [`registry!`] below: its state, its
//! details and its kinds. The order of the entries is the order the rules
//! run in, for every segment, exchange and close: a rule that renames
//! another's occurrences comes after it.

pub mod congestion;
pub mod framing;
pub mod idle;
pub mod listen_queue;
pub mod nagle;
pub mod path_mtu;
pub mod policer;
pub mod queueing;
pub mod receive_window;
pub mod refused_reset;
pub mod retransmission;
pub mod setup;
pub mod slow_start_after_idle;
pub mod syn_flood;
pub mod timing;
pub mod tls;
pub mod zero_window;

use tcpdoctor_flow::{Connection, Dir, Exchange, Segment};

use crate::budget::{Claims, Part, Split};
use crate::model::{Finding, LadderRow};

/// What a rule sees of the engine while a segment passes, besides the
/// connection and the segment; filled in as the rules run, in registry order.
pub(crate) struct SegmentCx<'a> {
    /// The occurrences found on this segment.
    pub out: &'a mut Vec<Occurrence>,
    /// Intervals explained so far, for the exchange's latency budget.
    pub claims: &'a mut Claims,
    /// The connection's recent packets, for a ladder a rule keeps itself.
    pub ring: &'a crate::Ring,
    /// The receive window was full in the segment's direction before it
    /// (the receive-window rule's state, read by the engine first).
    pub window_blocked: bool,
    /// A delayed ACK the Nagle rule saw: the ACK's sender and its wait.
    pub delayed_ack: Option<(Dir, i64)>,
}

/// What a rule sees at an exchange: before its budget is split
/// ([`Rule::on_exchange`]: what it finds there is in the budget), and with it
/// ([`Rule::on_budget`], complete exchanges only).
pub(crate) struct ExchangeCx<'a> {
    pub out: &'a mut Vec<Occurrence>,
    /// Pauses inside the request and the response ([`idle`]), and the longest.
    pub inside: [i64; 2],
    pub longest: [idle::Pause; 2],
    /// Of those pauses, the partial tails held for the cork's ceiling.
    pub cork_holds: [u32; 2],
    /// The exchange's budget (zero before [`Rule::on_budget`]).
    pub split: Split,
    /// The TLS handshake this exchange opened with, if it did.
    pub tls: Option<tls::Opened>,
    /// The base round trips of the connection's path.
    pub base: crate::budget::Base,
    /// A close-delimited response: how long the server took to close after
    /// its last byte (the exchange ends at its FIN).
    pub close_wait: i64,
    /// The request asked for `100 Continue` and none came.
    pub expect_unanswered: bool,
    /// The exchange's duration ([`Exchange::duration_ns`]; 0 before
    /// [`Rule::on_budget`]).
    pub duration_ns: i64,
}

/// What a rule sees when its connection closes.
pub(crate) struct CloseCx<'a> {
    pub out: &'a mut Vec<Occurrence>,
    /// The time restarts from the initial window cost (the restart rule's).
    pub restart_lost_ns: i64,
}

/// A rule's per-connection state and its hooks, each called in registry
/// order. All are optional.
pub(crate) trait Rule: Default {
    /// Every segment of the connection.
    #[inline]
    fn on_segment(&mut self, _cx: &mut SegmentCx<'_>, _conn: &Connection, _seg: &Segment<'_>) {}
    /// Every segment, after its occurrences are recorded (and their
    /// intervals claimed).
    #[inline]
    fn after_segment(&mut self, _claims: &mut Claims, _conn: &Connection, _seg: &Segment<'_>) {}
    /// Every exchange (complete or not), before its budget is split.
    #[inline]
    fn on_exchange(&mut self, _cx: &mut ExchangeCx<'_>, _conn: &Connection, _ex: &Exchange) {}
    /// Every complete exchange, with its budget.
    #[inline]
    fn on_budget(&mut self, _cx: &mut ExchangeCx<'_>, _conn: &Connection, _ex: &Exchange) {}
    /// The connection closed (or was evicted).
    #[inline]
    fn on_close(&mut self, _cx: &mut CloseCx<'_>, _conn: &Connection) {}
    /// A connection that closed as a plain handshake, without rule states.
    #[inline]
    fn on_close_light(_cx: &mut CloseCx<'_>, _conn: &Connection) {}
}

/// An occurrence's measurements, folded into its finding's running sums.
pub(crate) trait Fold {
    fn fold(self, a: &mut crate::Aggregate);
}

/// The registry: one entry per rule (its state, the details it measures,
/// the kinds it reports with their names, `words` and `cause`). Makes the
/// [`Kind`] and [`Detail`] enums, the per-connection [`States`] and their
/// hooks, and the dispatch of words and verdict sentences.
macro_rules! registry {
    ($(
        $(#[$doc:meta])*
        $field:ident : $module:ident :: $state:ident {
            details: [$($detail:ident),* $(,)?],
            kinds: [$($kind:ident = $n:literal $name:literal [$([$($fix:ident),*]),*] ($words:path, $cause:path $(, $standing:path)?)),* $(,)?],
        },
    )*) => {
        /// The finding vocabulary (docs/causes/README.md's "What it finds"
        /// table, docs/json.md's schema); extended only by adding. The numbers are the bits
        /// of a connection's kinds seen.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind {
            $($($kind = $n,)*)*
        }

        impl Kind {
            /// Every kind, in registry order.
            pub const ALL: &'static [Kind] = &[$($(Kind::$kind,)*)*];

            pub fn name(self) -> &'static str {
                match self {
                    $($(Kind::$kind => $name,)*)*
                }
            }
        }

        $($(pub use $module::$detail;)*)*

        /// Kind-specific measurements, one struct per rule's detail (in its file).
        #[derive(Debug, Clone)]
        pub enum Detail {
            $($($detail($module::$detail),)*)*
        }

        impl Detail {
            /// Folds an occurrence's measurements into its finding's running sums.
            pub(crate) fn fold(self, a: &mut crate::Aggregate) {
                match self {
                    $($(Detail::$detail(d) => Fold::fold(d, a),)*)*
                }
            }
        }

        /// Every rule's state for one connection.
        #[derive(Default)]
        pub(crate) struct States {
            $($(#[$doc])* pub $field: $module::$state,)*
        }

        impl States {
            #[inline]
            pub(crate) fn on_segment(&mut self, cx: &mut SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
                $(Rule::on_segment(&mut self.$field, cx, conn, seg);)*
            }
            #[inline]
            pub(crate) fn after_segment(&mut self, claims: &mut Claims, conn: &Connection, seg: &Segment<'_>) {
                $(Rule::after_segment(&mut self.$field, claims, conn, seg);)*
            }
            pub(crate) fn on_exchange(&mut self, cx: &mut ExchangeCx<'_>, conn: &Connection, ex: &Exchange) {
                $(Rule::on_exchange(&mut self.$field, cx, conn, ex);)*
            }
            pub(crate) fn on_budget(&mut self, cx: &mut ExchangeCx<'_>, conn: &Connection, ex: &Exchange) {
                $(Rule::on_budget(&mut self.$field, cx, conn, ex);)*
            }
            pub(crate) fn on_close(&mut self, cx: &mut CloseCx<'_>, conn: &Connection) {
                $(Rule::on_close(&mut self.$field, cx, conn);)*
            }
            pub(crate) fn on_close_light(cx: &mut CloseCx<'_>, conn: &Connection) {
                $(<$module::$state as Rule>::on_close_light(cx, conn);)*
            }
        }

        /// The budget parts a kind's fix takes out of the exchanges it
        /// touched, for its prediction: the first set, or another its rule
        /// chooses by what it found ([`fix_choice`]). Empty: no prediction.
        pub(crate) fn fix_parts(kind: Kind) -> &'static [&'static [Part]] {
            match kind {
                $($(Kind::$kind => &[$(&[$(Part::$fix),*]),*],)*)*
            }
        }

        /// A finding's explanation, fix and `details`, said by its rule.
        pub(crate) fn words(kind: Kind, said: &crate::text::Said<'_>) -> crate::text::Words {
            match kind {
                $($(Kind::$kind => $words(said),)*)*
            }
        }

        /// Whether a finding is reported among the major ones: by its share of
        /// the time, unless its rule says otherwise.
        pub(crate) fn standing(a: &crate::Aggregate) -> Standing {
            match a.kind {
                $($(Kind::$kind => registry!(@standing a $($standing)?),)*)*
            }
        }

        /// The verdict's sentence for a finding of the kind named `kind`.
        fn kind_cause(kind: &str, c: &Cause<'_>) -> Option<String> {
            match kind {
                $($($name => Some($cause(c)),)*)*
                _ => None,
            }
        }
    };
    (@standing $a:ident) => {
        Standing::ByShare
    };
    (@standing $a:ident $standing:path) => {
        $standing($a)
    };
}

/// Where a finding is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Among the major findings when its share of the time is large enough.
    ByShare,
    /// Among the major findings whatever its share (a failed request, an
    /// endpoint overwhelmed).
    Major,
    /// Among the minor findings whatever its share (not the pattern).
    Minor,
}

registry! {
    /// How HTTP messages end (close-delimited) and `Expect: 100-continue`
    /// (read by the engine and the timing rules).
    framing: framing::FramingState {
        details: [],
        kinds: [],
    },
    /// Nagle holding a small segment while the peer delays its ACK.
    nagle: nagle::NagleState {
        details: [Nagle],
        kinds: [NagleDelayedAck = 0 "nagle_delayed_ack" [[NagleDelayedAck]] (nagle::words, nagle::cause)],
    },
    /// A receiver that stops reading: its window at zero.
    zero_window: zero_window::ZeroWindowState {
        details: [ZeroWindow],
        kinds: [ZeroWindow = 2 "zero_window" [[Window]] (zero_window::words, zero_window::cause)],
    },
    /// Refused connections and resets that cost a request.
    reset: refused_reset::ResetState {
        details: [Failure],
        kinds: [
            ConnectionRefused = 15 "connection_refused" [] (refused_reset::words, refused_reset::cause, refused_reset::standing),
            ConnectionReset = 16 "connection_reset" [] (refused_reset::words, refused_reset::cause, refused_reset::standing),
        ],
    },
    /// Losses, recovered by the retransmission timer or fast retransmit.
    loss: retransmission::LossState {
        details: [Loss],
        kinds: [
            RetransmissionTimeout = 3 "retransmission_timeout" [[Retransmission]] (retransmission::words, retransmission::cause),
            PacketLoss = 4 "packet_loss" [[Retransmission]] (retransmission::words, retransmission::cause),
        ],
    },
    /// Full-size segments lost on the path for good (after `loss`: it renames its occurrences).
    mtu: path_mtu::MtuState {
        details: [Blackhole],
        kinds: [PathMtuBlackhole = 11 "path_mtu_blackhole" [[Retransmission]] (path_mtu::words, path_mtu::cause)],
    },
    /// Transfers paced by the sender's congestion window or its send buffer
    /// (whose fix takes the flights' own spreading too: the bytes the buffer
    /// lets out as each ACK of the flight before comes back).
    congestion: congestion::CongestionState {
        details: [Congestion, SendBuffer],
        kinds: [
            CongestionLimited = 9 "congestion_limited" [[CongestionWait]] (congestion::words, congestion::cause),
            SendBufferLimited = 20 "send_buffer_limited" [[Window, Bandwidth]] (congestion::buffer_words, congestion::buffer_cause),
        ],
    },
    /// A sender back at its initial window after an idle spell.
    restart: slow_start_after_idle::RestartState {
        details: [Restart],
        kinds: [SlowStartAfterIdle = 10 "slow_start_after_idle" [[CongestionWait]] (slow_start_after_idle::words, slow_start_after_idle::cause)],
    },
    /// Transfers pinned at the receiver's advertised window.
    window: receive_window::WindowState {
        details: [Window],
        kinds: [ReceiveWindowLimited = 1 "receive_window_limited" [[Window]] (receive_window::words, receive_window::cause)],
    },
    /// The endpoints' own time and the round trips of each exchange
    /// (after `congestion` and `restart`, whose time it does not count again).
    timing: timing::LatencyState {
        details: [Timing, Latency],
        kinds: [
            ServerDelay = 6 "server_delay" [[Server]] (timing::server_words, timing::server_cause),
            ClientDelay = 7 "client_delay" [[ClientIdle]] (timing::client_words, timing::client_cause, timing::client_standing),
            NetworkLatency = 8 "network_latency" [[Setup], [Setup, Network, CongestionWait]] (timing::latency_words, timing::latency_cause),
        ],
    },
    /// Round trips above the path's base: a queue on the path.
    queueing: queueing::QueueingState {
        details: [Queueing],
        kinds: [QueueingDelay = 17 "queueing_delay" [[Queueing]] (queueing::words, queueing::cause)],
    },
    /// Slow TLS handshakes.
    tls: tls::TlsState {
        details: [Tls],
        kinds: [TlsHandshake = 14 "tls_handshake" [[TlsKeyExchange]] (tls::words, tls::cause, tls::standing)],
    },
    /// SYN and SYN-ACK retries.
    setup: setup::SetupState {
        details: [Setup, Unanswered],
        kinds: [
            SynRetransmit = 5 "syn_retransmit" [[SynRetry]] (setup::words, setup::cause),
            ConnectionUnanswered = 18 "connection_unanswered" [] (setup::unanswered_words, setup::unanswered_cause, setup::unanswered_standing),
        ],
    },
    /// A full accept queue (after `loss` and `setup`: it renames their occurrences).
    listen: listen_queue::ListenState {
        details: [Listen],
        kinds: [ListenQueueOverflow = 12 "listen_queue_overflow" [[SynRetry, Retransmission, Server]] (listen_queue::words, listen_queue::cause)],
    },
    /// A token-bucket policer: losses at a fixed delivery rate without a
    /// queue before them (after `loss`, `mtu` and `listen`: it takes the
    /// loss occurrences they leave, and folds a policed transfer's into one).
    policer: policer::PolicerState {
        details: [Policed],
        kinds: [Policer = 19 "policer" [[Retransmission, CongestionWait, Transfer, Bandwidth]] (policer::words, policer::cause)],
    },
    /// Pauses inside messages, left for the timing rules (last: it leaves
    /// alone the pauses the rules above explained).
    idle: idle::IdleState {
        details: [],
        kinds: [],
    },
    /// SYN floods: judged per endpoint over the whole capture (the engine
    /// keeps [`syn_flood::Floods`]); no state per connection.
    syn_flood: syn_flood::NoState {
        details: [Flood],
        kinds: [SynFlood = 13 "syn_flood" [[SynRetry]] (syn_flood::words, syn_flood::cause, syn_flood::standing)],
    },
}

/// Which of a kind's [`fix_parts`] its finding's fix removes (index): the
/// first, unless its rule tells by what it measured.
pub(crate) fn fix_choice(a: &crate::Aggregate) -> usize {
    match a.kind {
        Kind::NetworkLatency => timing::latency_fix_choice(a),
        _ => 0,
    }
}

impl Kind {
    /// A request failed (rather than waited): reported whatever its share of
    /// the time, before the delays.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Kind::ConnectionRefused | Kind::ConnectionReset | Kind::ConnectionUnanswered
        )
    }

    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// Whether the kind named so is a failed request ([`Kind::is_failure`]).
pub fn failure_name(name: &str) -> bool {
    matches!(
        name,
        "connection_refused" | "connection_reset" | "connection_unanswered"
    )
}

/// One instance of a mechanism costing time.
#[derive(Debug, Clone)]
pub struct Occurrence {
    pub kind: Kind,
    /// Who is responsible.
    pub culprit: Blame,
    pub delay_ns: i64,
    pub frames: Vec<u64>,
    /// Notes for the ladder: (frame, note).
    pub notes: Vec<(u64, String)>,
    /// Start the ladder at this frame if it is still in the recent-packet ring.
    pub ladder_from: Option<u64>,
    /// A ladder captured by the rule itself (for findings decided at close).
    pub ladder: Option<Vec<LadderRow>>,
    /// The interval this occurrence explains, for the latency budget.
    pub span: Option<(
        crate::budget::Part,
        tcpdoctor_wire::Timestamp,
        tcpdoctor_wire::Timestamp,
    )>,
    pub detail: Detail,
}

/// Who an occurrence blames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The endpoint that sends in this direction (`ClientToServer`: the client).
    Side(Dir),
    /// The path. The direction names the data that suffered, for the report.
    Network(Dir),
}

/// Where an endpoint sits in a connection.
pub fn endpoint_of(conn: &Connection, side: Dir) -> (std::net::SocketAddr, &'static str) {
    match side {
        Dir::ClientToServer => (conn.client.addr, "client"),
        Dir::ServerToClient => (conn.server.addr, "server"),
    }
}

/// The smaller of two optional values.
pub(crate) fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// What every verdict sentence says, for a rule's `cause`.
pub struct Cause<'a> {
    pub f: &'a Finding,
    pub ep: &'a str,
    pub role: &'static str,
    /// The typical delay, formatted.
    pub typ: String,
    /// How many of the capture's exchanges it hit ("40% of exchanges").
    pub of_exchanges: String,
}

impl Cause<'_> {
    /// A string of the finding's `details`.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.f.details.get(key).and_then(|v| v.as_str())
    }

    /// A number of the finding's `details`.
    pub fn num(&self, key: &str) -> Option<f64> {
        self.f.details.get(key).and_then(|v| v.as_f64())
    }
}

/// The verdict's sentence for finding `f` of a capture of `exchanges`
/// exchanges: the mechanism, who is responsible and its share of the time
/// (for a failed request: what failed).
pub fn cause(f: &Finding, exchanges: u64) -> String {
    let of_exchanges = if exchanges > 0 {
        let pct = (f.occurrences as f64 / exchanges as f64 * 100.0).min(100.0);
        format!("{pct:.0}% of exchanges")
    } else {
        format!("{} exchanges", f.occurrences)
    };
    let c = Cause {
        f,
        ep: &f.culprit.endpoint,
        role: f.culprit.role,
        typ: crate::fmt_ms(f.typical_delay_ms),
        of_exchanges,
    };
    let what = kind_cause(f.kind, &c)
        .unwrap_or_else(|| format!("{} at {} ({}), ~{} each", f.kind, c.ep, c.role, c.typ));
    if failure_name(f.kind) {
        return what;
    }
    let share = f.share_of_time * 100.0;
    format!("{what}; that is {share:.0}% of the time ({})", f.kind)
}
