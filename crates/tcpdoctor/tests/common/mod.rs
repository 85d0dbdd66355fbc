//! What the capture tables (fixtures/ACCURACY.md, fixtures/corpus/CORPUS.md)
//! record of a capture: what tcpdoctor reports first.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A healthy capture may have no finding at or above this share of the time.
pub const HEALTHY_MAX_SHARE: f64 = 0.05;

/// `tcpdoctor analyze --format json` of `path` with `args` before it, which
/// must succeed.
#[allow(dead_code)]
pub fn analyze(path: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["analyze", "--format", "json"])
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What tcpdoctor reports first: `kind/role` of the first finding costing
/// [`HEALTHY_MAX_SHARE`] of the time or failing requests, or `none`.
#[allow(dead_code)]
pub fn reported(path: &Path) -> String {
    let v = analyze(path, &[]);
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            // Failed requests count whatever time they took.
            f["share_of_time"].as_f64().unwrap() >= HEALTHY_MAX_SHARE
                || f["details"].get("requests_lost").is_some()
        })
        .map_or("none".to_string(), |f| {
            format!(
                "{}/{}",
                f["kind"].as_str().unwrap(),
                f["culprit"]["role"].as_str().unwrap()
            )
        })
}

/// A committed capture under `fixtures/`.
#[allow(dead_code)]
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

/// The frames of a finding's first evidence entry.
#[allow(dead_code)]
pub fn frames(f: &Value) -> Vec<u64> {
    f["evidence"][0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect()
}

/// Each finding as `kind/role`, in the report's order.
#[allow(dead_code)]
pub fn kinds(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}/{}",
                f["kind"].as_str().unwrap(),
                f["culprit"]["role"].as_str().unwrap()
            )
        })
        .collect()
}
