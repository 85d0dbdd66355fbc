//! The sysctls that bound TCP latency and windows: a catalogue (name, group,
//! scope, one-line meaning) and, for each, a judgement over its value and the
//! values it interacts with (a window needs tcp_rmem, the share of
//! tcp_adv_win_scale, tcp_window_scaling and the kernel release).
//!
//! One file per group; each `Spec` carries its rule as a plain function, so a
//! reader finds "where is the tcp_sack rule?" by the group's file name.

mod buffers;
mod congestion;
mod queues;
mod timers;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::window::{self, Kernel, Share};
use crate::{in_namespace, Namespace, Severity};

/// The groups of the report, in the order they are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Group {
    #[serde(rename = "buffers & windows")]
    Buffers,
    #[serde(rename = "loss recovery & timers")]
    Timers,
    #[serde(rename = "queues & backlog")]
    Queues,
    #[serde(rename = "congestion")]
    Congestion,
}

impl Group {
    pub const ALL: [Group; 4] = [
        Group::Buffers,
        Group::Timers,
        Group::Queues,
        Group::Congestion,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Group::Buffers => "buffers & windows",
            Group::Timers => "loss recovery & timers",
            Group::Queues => "queues & backlog",
            Group::Congestion => "congestion",
        }
    }
}

/// Whose value it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Each network namespace has its own value.
    Namespace,
    /// One value for the whole host: read-only, or not visible at all, in
    /// other namespaces (net.core.rmem_max, netdev_max_backlog, default_qdisc…).
    Host,
}

/// A value as read from /proc/sys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    Value(String),
    /// No such file: not on this kernel, or not visible in this namespace.
    Absent,
    /// There but unreadable (the error).
    Unreadable(String),
}

/// What the rules look at: every value read, the kernel, the namespace.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub values: BTreeMap<String, Reading>,
    pub kernel: Option<Kernel>,
    pub namespace: Namespace,
}

impl Snapshot {
    /// A snapshot from `name = value` pairs (tests, fuzzing).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Snapshot {
        Snapshot {
            values: pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), Reading::Value(v.to_string())))
                .collect(),
            ..Snapshot::default()
        }
    }
}

/// One reported setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    pub name: &'static str,
    /// As sysctl prints it (tabs as spaces); None when absent or unreadable.
    pub value: Option<String>,
    pub group: Group,
    pub scope: Scope,
    pub meaning: &'static str,
    pub severity: Severity,
    pub judgement: Option<String>,
    pub fix: Option<String>,
}

/// A rule's outcome: how bad, why (with numbers), and the value to set instead.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub severity: Severity,
    pub judgement: Option<String>,
    pub set: Option<String>,
}

impl Verdict {
    pub fn ok() -> Verdict {
        Verdict {
            severity: Severity::Ok,
            judgement: None,
            set: None,
        }
    }

    pub fn ok_because(judgement: impl Into<String>) -> Verdict {
        Verdict {
            severity: Severity::Ok,
            judgement: Some(judgement.into()),
            set: None,
        }
    }

    pub fn note(judgement: impl Into<String>, set: Option<String>) -> Verdict {
        Verdict {
            severity: Severity::Note,
            judgement: Some(judgement.into()),
            set,
        }
    }

    pub fn warn(judgement: impl Into<String>, set: Option<String>) -> Verdict {
        Verdict {
            severity: Severity::Warn,
            judgement: Some(judgement.into()),
            set,
        }
    }
}

/// One catalogued sysctl.
pub(crate) struct Spec {
    pub name: &'static str,
    pub group: Group,
    pub scope: Scope,
    pub meaning: &'static str,
    /// Said instead of "not present on this kernel" when the file is missing.
    pub absent: Option<&'static str>,
    pub judge: fn(&Ctx<'_>, &str) -> Verdict,
}

/// The snapshot as the rules query it.
pub(crate) struct Ctx<'a> {
    pub snap: &'a Snapshot,
}

impl Ctx<'_> {
    pub fn raw(&self, name: &str) -> Option<&str> {
        match self.snap.values.get(name) {
            Some(Reading::Value(v)) => Some(v.trim()),
            _ => None,
        }
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        self.raw(name).and_then(int)
    }

    pub fn kernel(&self) -> Option<Kernel> {
        self.snap.kernel
    }

    /// The share of a receive buffer advertised as window.
    pub fn share(&self) -> Share {
        window::share(self.kernel(), self.int("net.ipv4.tcp_adv_win_scale"))
    }

    /// Window scaling on (absent counts as on: it is the default everywhere).
    pub fn scaling(&self) -> bool {
        self.int("net.ipv4.tcp_window_scaling") != Some(0)
    }

    /// The congestion control new connections get.
    pub fn congestion_control(&self) -> Option<&str> {
        self.raw("net.ipv4.tcp_congestion_control")
    }
}

/// A single integer value ("1", "-2", "4294967295").
pub(crate) fn int(v: &str) -> Option<i64> {
    v.trim().parse().ok()
}

/// Whitespace-separated integers ("4096\t131072\t6291456").
pub(crate) fn ints(v: &str) -> Option<Vec<i64>> {
    v.split_whitespace().map(|s| s.parse().ok()).collect()
}

/// Every catalogued setting, in report order.
pub(crate) fn catalogue() -> impl Iterator<Item = &'static Spec> {
    buffers::SPECS
        .iter()
        .chain(timers::SPECS)
        .chain(queues::SPECS)
        .chain(congestion::SPECS)
}

/// The names to read from /proc/sys.
pub fn names() -> impl Iterator<Item = &'static str> {
    catalogue().map(|s| s.name)
}

/// Judges every catalogued setting of the snapshot.
pub fn judge(snap: &Snapshot) -> Vec<Setting> {
    let ctx = Ctx { snap };
    let ns = &snap.namespace;
    let elsewhere = ns.initial == Some(false);
    catalogue()
        .map(|spec| {
            let reading = snap.values.get(spec.name).unwrap_or(&Reading::Absent);
            let (value, verdict) = match reading {
                Reading::Value(v) => {
                    let shown = v.split_whitespace().collect::<Vec<_>>().join(" ");
                    (Some(shown), (spec.judge)(&ctx, v.trim()))
                }
                Reading::Absent => (None, absent(spec, elsewhere)),
                Reading::Unreadable(e) => (None, Verdict::ok_because(format!("unreadable: {e}"))),
            };
            let mut judgement = verdict.judgement;
            let fix = verdict.set.map(|v| {
                let command = format!("sysctl -w {}={}", spec.name, quote(&v));
                match spec.scope {
                    Scope::Namespace => in_namespace(ns, command),
                    Scope::Host => command,
                }
            });
            if fix.is_some() && spec.scope == Scope::Host && elsewhere {
                if let Some(j) = judgement.as_mut() {
                    j.push_str(
                        " One value for the whole host: set it there (this namespace only reads it).",
                    );
                }
            }
            Setting {
                name: spec.name,
                value,
                group: spec.group,
                scope: spec.scope,
                meaning: spec.meaning,
                severity: verdict.severity,
                judgement,
                fix,
            }
        })
        .collect()
}

fn absent(spec: &Spec, elsewhere: bool) -> Verdict {
    if let Some(why) = spec.absent {
        return Verdict::ok_because(why);
    }
    if spec.scope == Scope::Host && elsewhere {
        return Verdict::ok_because(format!(
            "absent: a host-wide setting, not visible in this network namespace (on the host: sysctl {})",
            spec.name
        ));
    }
    Verdict::ok_because("absent: not on this kernel")
}

/// Quotes a value for the shell when it has spaces: '4096 131072 6291456'.
fn quote(v: &str) -> String {
    if v.contains(char::is_whitespace) {
        format!("'{v}'")
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn judged<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Setting> {
        let mut s = Snapshot::from_pairs(pairs);
        s.kernel = Some(Kernel {
            major: 6,
            minor: 18,
        });
        judge(&s)
    }

    pub(crate) fn one<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        name: &str,
    ) -> Setting {
        judged(pairs)
            .into_iter()
            .find(|s| s.name == name)
            .expect("catalogued")
    }

    #[test]
    fn catalogue_names_are_unique_and_under_net() {
        let mut seen = std::collections::HashSet::new();
        for s in catalogue() {
            assert!(seen.insert(s.name), "{} twice", s.name);
            assert!(s.name.starts_with("net."), "{}", s.name);
            assert!(!s.meaning.is_empty());
        }
        assert!(seen.len() >= 30);
    }

    #[test]
    fn absent_is_reported_never_an_error() {
        let all = judge(&Snapshot::default());
        assert_eq!(all.len(), catalogue().count());
        for s in &all {
            assert_eq!(s.value, None);
            assert_eq!(s.severity, Severity::Ok);
            assert!(s.judgement.as_deref().is_some_and(|j| !j.is_empty()));
            assert_eq!(s.fix, None);
        }
    }

    #[test]
    fn host_wide_absent_in_a_namespace_says_where_to_look() {
        let mut s = Snapshot::default();
        s.namespace.initial = Some(false);
        let got = judge(&s);
        let b = got
            .iter()
            .find(|x| x.name == "net.core.netdev_max_backlog")
            .expect("catalogued");
        assert_eq!(b.scope, Scope::Host);
        assert!(b
            .judgement
            .as_deref()
            .is_some_and(|j| j.contains("not visible in this network namespace")));
    }

    #[test]
    fn fixes_run_in_the_named_namespace_except_host_wide_ones() {
        let mut s =
            Snapshot::from_pairs([("net.ipv4.tcp_sack", "0"), ("net.core.rmem_max", "16384")]);
        s.namespace = Namespace {
            id: "net:[1]".into(),
            name: Some("web".into()),
            initial: Some(false),
        };
        let got = judge(&s);
        let sack = got
            .iter()
            .find(|x| x.name == "net.ipv4.tcp_sack")
            .expect("sack");
        assert_eq!(
            sack.fix.as_deref(),
            Some("ip netns exec web sysctl -w net.ipv4.tcp_sack=1")
        );
        let rmem = got
            .iter()
            .find(|x| x.name == "net.core.rmem_max")
            .expect("rmem_max");
        assert_eq!(
            rmem.fix.as_deref(),
            Some("sysctl -w net.core.rmem_max=16777216")
        );
        assert!(rmem
            .judgement
            .as_deref()
            .is_some_and(|j| j.contains("whole host")));
    }

    #[test]
    fn unreadable_and_garbage_values_do_not_panic() {
        let mut s = Snapshot::default();
        for name in names() {
            s.values
                .insert(name.to_string(), Reading::Value("x \u{fffd} -".into()));
        }
        s.values.insert(
            "net.ipv4.tcp_sack".into(),
            Reading::Unreadable("permission denied".into()),
        );
        for v in judge(&s) {
            assert_ne!(v.severity, Severity::Warn, "{} warned on garbage", v.name);
        }
    }

    #[test]
    fn values_are_shown_as_sysctl_prints_them() {
        let s = one(
            [("net.ipv4.tcp_rmem", "4096\t131072\t6291456\n")],
            "net.ipv4.tcp_rmem",
        );
        assert_eq!(s.value.as_deref(), Some("4096 131072 6291456"));
    }
}
