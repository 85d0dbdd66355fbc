//! Puts the commit into `tcpdoctor --version`: `TCPDOCTOR_COMMIT` from the
//! environment if set (for builds from a source tarball that know it), else
//! `git rev-parse --short HEAD` when the workspace is a git checkout, else
//! "unknown". Never fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TCPDOCTOR_COMMIT");
    let commit = std::env::var("TCPDOCTOR_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.trim().to_string())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=TCPDOCTOR_COMMIT={commit}");
}

/// The short hash of HEAD, when the workspace root (two levels above this
/// crate) is itself a git checkout: a source tree unpacked inside some other
/// repository must not report that repository's commit.
fn git_commit() -> Option<String> {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let root = manifest.parent()?.parent()?;
    if !root.join(".git").exists() {
        return None;
    }
    let hash = git(root, &["rev-parse", "--short", "HEAD"])?;
    // Rebuild when HEAD moves: HEAD itself (a checkout), the branch it
    // names (a commit) and packed-refs. Only files that exist: a missing
    // one would make every build rerun this script.
    let mut watched = vec![git(root, &["rev-parse", "--git-path", "HEAD"])?];
    if let Some(branch) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(path) = git(root, &["rev-parse", "--git-path", &branch]) {
            watched.push(path);
        }
    }
    if let Some(path) = git(root, &["rev-parse", "--git-path", "packed-refs"]) {
        watched.push(path);
    }
    for path in watched {
        let path = root.join(path);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    Some(hash)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}
