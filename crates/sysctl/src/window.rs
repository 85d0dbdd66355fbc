//! How large a TCP window a buffer allows, and what that window carries per
//! round trip: the arithmetic behind "tcp_rmem max too small for a long fat
//! path" (throughput <= window / RTT).
//!
//! Linux advertises only part of a socket's receive buffer as window; the rest
//! pays for the kernel's bookkeeping (sk_buff overhead). Before Linux 6.6 the
//! part was fixed by `net.ipv4.tcp_adv_win_scale` (N > 0: buffer − buffer/2^N;
//! N <= 0: buffer/2^−N). Since 6.6 (commit "tcp: get rid of
//! sysctl_tcp_adv_win_scale") each connection measures its own ratio of
//! payload to memory (`scaling_ratio`, starting at 50%) and the sysctl is
//! ignored.

use crate::units;

/// The round trips windows are judged at: a metro path, a continent, across an ocean.
pub const RTTS_MS: [u32; 3] = [10, 50, 100];

/// The largest window without the window scale option (RFC 7323 §2): 2^16 − 1.
pub const UNSCALED_MAX: u64 = 65_535;
/// The largest window with it: 2^16 − 1 shifted by the maximum scale, 14.
pub const SCALED_MAX: u64 = 65_535 << 14;

/// A window below this cannot carry 100 Mbit/s over a 50 ms round trip:
/// the line between "fine" and "a long fat path cannot be filled".
pub const LONG_FAT_WINDOW: u64 = 625_000;

/// A Linux kernel release, as far as the rules need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Kernel {
    pub major: u32,
    pub minor: u32,
}

impl Kernel {
    /// "6.18.44-fc-v595" → 6.18.
    pub fn parse(release: &str) -> Option<Kernel> {
        let mut it = release.trim().split(['.', '-']);
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        Some(Kernel { major, minor })
    }

    pub fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

/// The share of a receive buffer that is advertised as window.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    pub ratio: f64,
    /// How it was arrived at, for the judgement ("× ½, measured per connection since Linux 6.6").
    pub how: String,
}

/// The share on `kernel` with `tcp_adv_win_scale` = `adv` (None: unknown).
pub fn share(kernel: Option<Kernel>, adv: Option<i64>) -> Share {
    if kernel.is_some_and(|k| k.at_least(6, 6)) {
        return Share {
            ratio: 0.5,
            how: "× ½: since Linux 6.6 each connection measures its own share, starting at ½"
                .into(),
        };
    }
    let Some(adv) = adv else {
        return Share {
            ratio: 0.5,
            how: "× ½ assumed".into(),
        };
    };
    let adv = adv.clamp(-31, 31) as i32;
    let ratio = if adv > 0 {
        1.0 - 0.5f64.powi(adv)
    } else {
        0.5f64.powi(-adv)
    };
    Share {
        ratio,
        how: format!("× {} (tcp_adv_win_scale {adv})", fraction(ratio)),
    }
}

/// ½, ¾, ⅞, ¼… for the common shares, else a decimal.
pub fn fraction(r: f64) -> String {
    const NAMED: [(f64, &str); 6] = [
        (0.5, "½"),
        (0.75, "¾"),
        (0.875, "⅞"),
        (0.25, "¼"),
        (0.125, "⅛"),
        (1.0, "1"),
    ];
    for (v, s) in NAMED {
        if (r - v).abs() < 1e-9 {
            return s.to_string();
        }
    }
    units::short(r)
}

/// The largest window a buffer of `buffer` bytes allows: its share, capped
/// at 64 KB without window scaling (`scaling` false) and at 1 GB with it.
pub fn window(buffer: u64, share: f64, scaling: bool) -> u64 {
    let w = (buffer as f64 * share) as u64;
    w.min(if scaling { SCALED_MAX } else { UNSCALED_MAX })
}

/// Throughput in bit/s that `window` bytes allow over `rtt_ms`.
pub fn throughput(window: u64, rtt_ms: u32) -> f64 {
    window as f64 * 8.0 / (f64::from(rtt_ms.max(1)) / 1000.0)
}

/// "6.55 Mbit/s at 10 ms, 1.31 Mbit/s at 50 ms, 655 kbit/s at 100 ms".
pub fn at_rtts(window: u64) -> String {
    RTTS_MS
        .iter()
        .map(|&ms| format!("{} at {ms} ms", units::rate(throughput(window, ms))))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_release() {
        let k = Kernel::parse("6.18.44-fc-v595").expect("parses");
        assert_eq!(
            k,
            Kernel {
                major: 6,
                minor: 18
            }
        );
        assert!(k.at_least(6, 6));
        assert!(!Kernel::parse("3.10.0-1160.el7")
            .expect("parses")
            .at_least(6, 6));
        assert_eq!(Kernel::parse("garbage"), None);
    }

    #[test]
    fn share_before_and_after_6_6() {
        let old = Some(Kernel {
            major: 5,
            minor: 15,
        });
        // The seed case: tcp_adv_win_scale 2 on 3.10 gives ¾ of the buffer.
        assert_eq!(share(old, Some(2)).ratio, 0.75);
        assert_eq!(share(old, Some(1)).ratio, 0.5);
        assert_eq!(share(old, Some(-2)).ratio, 0.25);
        assert!(share(old, Some(2)).how.contains("tcp_adv_win_scale 2"));
        // 6.6 and later ignore the sysctl.
        let new = Some(Kernel { major: 6, minor: 6 });
        assert_eq!(share(new, Some(2)).ratio, 0.5);
        assert!(share(new, Some(2)).how.contains("6.6"));
        // Absurd values do not overflow.
        assert!(share(old, Some(i64::MAX)).ratio <= 1.0);
        assert!(share(old, Some(i64::MIN)).ratio >= 0.0);
    }

    #[test]
    fn windows_and_throughput() {
        // tcp_rmem max 16384 × ½ = 8 KB: 6.55 Mbit/s at 10 ms.
        let w = window(16_384, 0.5, true);
        assert_eq!(w, 8192);
        assert_eq!(
            at_rtts(w),
            "6.55 Mbit/s at 10 ms, 1.31 Mbit/s at 50 ms, 655 kbit/s at 100 ms"
        );
        // Without window scaling nothing exceeds 64 KB.
        assert_eq!(window(6_291_456, 0.5, false), 65_535);
        assert_eq!(window(u64::MAX / 2, 1.0, true), SCALED_MAX);
        // The seed case's server: 6 MB × ¾ = 4.5 MB, plenty at 35 ms.
        assert!(window(6_291_456, 0.75, true) > LONG_FAT_WINDOW);
        assert_eq!(throughput(LONG_FAT_WINDOW, 50), 100e6);
    }
}
