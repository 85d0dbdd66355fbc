//! Diagnosis rules and their registry. Each rule watches one connection's
//! segments, exchanges and close, and reports [`Occurrence`]s; the engine
//! folds them into findings.
//!
//! A rule is one file: its per-connection state (a
//! [`Rule`](crate::rule::Rule)), what one occurrence measured (a detail
//! struct that [`Fold`](crate::rule::Fold)s into the finding's sums), `words`
//! — the finding's explanation, fix and `details` — and `cause`, the
//! verdict's sentence, next to the detection they describe. It imports what
//! every rule shares from [`crate::rule`], not from here. Its detail structs
//! are variants of [`Detail`] and its kinds variants of [`Kind`] (both in
//! [`crate::rule`]), and it is registered with one entry in [`registry!`]
//! below: its state and its kinds. The order of the entries is the order the
//! rules run in, for every segment, exchange and close: a rule that renames
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

use tcpdoctor_flow::{Connection, Exchange, Segment};

use crate::budget::{Claims, Part};
use crate::model::Finding;
pub use crate::rule::{endpoint_of, failure_name, Blame, Cause, Detail, Kind, Occurrence};
use crate::rule::{CloseCx, ExchangeCx, Rule, SegmentCx, Standing};

/// The registry: one entry per rule (its state, the kinds it reports with
/// their names, fixes, `words` and `cause`). Makes [`Kind::ALL`] and
/// [`Kind::name`], the per-connection [`States`] and their hooks, and the
/// dispatch of fixes, words, standings and verdict sentences.
macro_rules! registry {
    ($(
        $(#[$doc:meta])*
        $field:ident : $module:ident :: $state:ident {
            kinds: [$($kind:ident $name:literal [$([$($fix:ident),*]),*] ($words:path, $cause:path $(, $standing:path)?)),* $(,)?],
        },
    )*) => {
        impl Kind {
            /// Every kind, in registry order.
            pub const ALL: &'static [Kind] = &[$($(Kind::$kind,)*)*];

            pub fn name(self) -> &'static str {
                match self {
                    $($(Kind::$kind => $name,)*)*
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

registry! {
    /// How HTTP messages end (close-delimited) and `Expect: 100-continue`
    /// (read by the engine and the timing rules).
    framing: framing::FramingState {
        kinds: [],
    },
    /// Nagle holding a small segment while the peer delays its ACK.
    nagle: nagle::NagleState {
        kinds: [NagleDelayedAck "nagle_delayed_ack" [[NagleDelayedAck]] (nagle::words, nagle::cause)],
    },
    /// A receiver that stops reading: its window at zero.
    zero_window: zero_window::ZeroWindowState {
        kinds: [ZeroWindow "zero_window" [[ReaderWait]] (zero_window::words, zero_window::cause)],
    },
    /// Refused connections and resets that cost a request.
    reset: refused_reset::ResetState {
        kinds: [
            ConnectionRefused "connection_refused" [] (refused_reset::words, refused_reset::cause, refused_reset::standing),
            ConnectionReset "connection_reset" [] (refused_reset::words, refused_reset::cause, refused_reset::standing),
        ],
    },
    /// Losses, recovered by the retransmission timer or fast retransmit.
    loss: retransmission::LossState {
        kinds: [
            RetransmissionTimeout "retransmission_timeout" [[Retransmission]] (retransmission::words, retransmission::cause),
            PacketLoss "packet_loss" [[Retransmission]] (retransmission::words, retransmission::cause),
        ],
    },
    /// Full-size segments lost on the path for good (after `loss`: it renames its occurrences).
    mtu: path_mtu::MtuState {
        kinds: [PathMtuBlackhole "path_mtu_blackhole" [[Retransmission]] (path_mtu::words, path_mtu::cause)],
    },
    /// Transfers paced by the sender's congestion window or its send buffer
    /// (whose fix takes the flights' own spreading too: the bytes the buffer
    /// lets out as each ACK of the flight before comes back).
    congestion: congestion::CongestionState {
        kinds: [
            CongestionLimited "congestion_limited" [[CongestionWait], [Retransmission]] (congestion::words, congestion::cause),
            SendBufferLimited "send_buffer_limited" [[Window, Bandwidth]] (congestion::buffer_words, congestion::buffer_cause),
        ],
    },
    /// A sender back at its initial window after an idle spell.
    restart: slow_start_after_idle::RestartState {
        kinds: [SlowStartAfterIdle "slow_start_after_idle" [[CongestionWait]] (slow_start_after_idle::words, slow_start_after_idle::cause)],
    },
    /// Transfers pinned at the receiver's advertised window.
    window: receive_window::WindowState {
        kinds: [ReceiveWindowLimited "receive_window_limited" [[Window], [ReaderWait]] (receive_window::words, receive_window::cause)],
    },
    /// The endpoints' own time and the round trips of each exchange
    /// (after `congestion` and `restart`, whose time it does not count again).
    timing: timing::LatencyState {
        kinds: [
            ServerDelay "server_delay" [[Server]] (timing::server_words, timing::server_cause),
            ClientDelay "client_delay" [[ClientIdle]] (timing::client_words, timing::client_cause, timing::client_standing),
            NetworkLatency "network_latency" [[Setup], [Setup, Network, CongestionWait]] (timing::latency_words, timing::latency_cause),
        ],
    },
    /// Round trips above the path's base: a queue on the path.
    queueing: queueing::QueueingState {
        kinds: [QueueingDelay "queueing_delay" [[Queueing]] (queueing::words, queueing::cause)],
    },
    /// Slow TLS handshakes.
    tls: tls::TlsState {
        kinds: [TlsHandshake "tls_handshake" [[TlsKeyExchange]] (tls::words, tls::cause, tls::standing)],
    },
    /// SYN and SYN-ACK retries.
    setup: setup::SetupState {
        kinds: [
            SynRetransmit "syn_retransmit" [[SynRetry]] (setup::words, setup::cause),
            ConnectionUnanswered "connection_unanswered" [] (setup::unanswered_words, setup::unanswered_cause, setup::unanswered_standing),
        ],
    },
    /// A full accept queue (after `loss` and `setup`: it renames their occurrences).
    listen: listen_queue::ListenState {
        kinds: [ListenQueueOverflow "listen_queue_overflow" [[SynRetry, Retransmission, Server]] (listen_queue::words, listen_queue::cause)],
    },
    /// A token-bucket policer: losses at a fixed delivery rate without a
    /// queue before them (after `loss`, `mtu` and `listen`: it takes the
    /// loss occurrences they leave, and folds a policed transfer's into one).
    policer: policer::PolicerState {
        kinds: [Policer "policer" [[Retransmission, CongestionWait, Transfer, Bandwidth]] (policer::words, policer::cause)],
    },
    /// Pauses inside messages, left for the timing rules (last: it leaves
    /// alone the pauses the rules above explained).
    idle: idle::IdleState {
        kinds: [],
    },
    /// SYN floods: judged per endpoint over the whole capture (the engine
    /// keeps [`syn_flood::Floods`]); no state per connection.
    syn_flood: syn_flood::NoState {
        kinds: [SynFlood "syn_flood" [[SynRetry]] (syn_flood::words, syn_flood::cause, syn_flood::standing)],
    },
}

/// Which of a kind's [`fix_parts`] its finding's fix removes (index): the
/// first, unless its rule tells by what it measured.
pub(crate) fn fix_choice(a: &crate::Aggregate) -> usize {
    match a.kind {
        Kind::NetworkLatency => timing::latency_fix_choice(a),
        Kind::CongestionLimited => congestion::fix_choice(a),
        Kind::ReceiveWindowLimited => usize::from(receive_window::slow_reader(a)),
        _ => 0,
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
