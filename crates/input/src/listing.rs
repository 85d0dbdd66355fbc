//! The captures of a sweep (`analyze FILE… --parquet DIR`): files as given,
//! directories searched recursively, globs the shell did not expand; each
//! capture is analysed on its own.

use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The `host` of a capture: the name of the directory it is in.
pub fn host_of(file: &Path) -> String {
    if file.as_os_str() == "-" {
        return "-".into();
    }
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Files as given, directories searched (sorted, recursively), and globs
/// (`*`, `?` in the last part of a path) that the shell did not expand.
pub fn expand(args: &[String]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for a in args {
        let p = Path::new(a);
        if a == "-" || p.is_file() {
            out.push(p.to_path_buf());
        } else if p.is_dir() {
            walk(p, &mut out).with_context(|| a.clone())?;
        } else if a.contains(['*', '?']) {
            let before = out.len();
            glob(p, &mut out).with_context(|| a.clone())?;
            if out.len() == before {
                anyhow::bail!("{a}: no file matches");
            }
        } else {
            // Reported by the sweep like any other unreadable capture.
            out.push(p.to_path_buf());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.is_file() {
            // The files `analyze DIR` reads: compressed captures, rotated
            // files told by their first bytes; hidden files left alone.
            let hidden = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if !hidden && crate::merge::looks_like_capture(&p) {
                out.push(p);
            }
        }
    }
    Ok(())
}

fn glob(pattern: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let dir = match pattern.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Some(pat) = pattern
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
    else {
        return Ok(());
    };
    // A wildcard in a directory part: expand that part first.
    let dirs: Vec<PathBuf> = if dir.to_string_lossy().contains(['*', '?']) {
        let mut d = Vec::new();
        glob(dir, &mut d)?;
        d.retain(|p| p.is_dir());
        d
    } else {
        vec![dir.to_path_buf()]
    };
    for dir in dirs {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .filter(|e| matches(pat.as_bytes(), e.file_name().to_string_lossy().as_bytes()))
            .map(|e| dir.join(e.file_name()))
            .collect();
        found.sort();
        out.extend(found);
    }
    Ok(())
}

/// `*` any run of characters, `?` one character, anything else itself.
fn matches(pat: &[u8], name: &[u8]) -> bool {
    match (pat.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            matches(&pat[1..], name) || (!name.is_empty() && matches(pat, &name[1..]))
        }
        (Some(b'?'), Some(_)) => matches(&pat[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => matches(&pat[1..], &name[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn glob_patterns() {
        assert!(matches(b"*.pcap", b"a.pcap"));
        assert!(matches(b"*.pcap", b".pcap"));
        assert!(!matches(b"*.pcap", b"a.pcapng"));
        assert!(matches(b"a?c*", b"abcdef"));
        assert!(!matches(b"a?c", b"ac"));
        assert!(matches(b"*", b""));
    }
}
