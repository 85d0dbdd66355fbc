//! fixtures/corpus/CORPUS.md is a corpus of public captures made outside the
//! project, each judged by hand (with tshark) before tcpdoctor was run on it.
//! This test re-runs every row: the "reported" column must be what the binary
//! says today and "match" must compare it with the verdict judged by hand. A
//! wrong verdict does not fail the test (the table records it); a stale table
//! does.

#![allow(clippy::unwrap_used)]

use std::path::Path;

mod common;
use common::reported;

/// A verdict cell: `none`, or `kind/role` with a role tcpdoctor can name.
fn well_formed(verdict: &str) -> bool {
    verdict == "none"
        || verdict.split_once('/').is_some_and(|(kind, role)| {
            !kind.is_empty()
                && kind.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                && ["client", "server", "network"].contains(&role)
        })
}

#[test]
fn public_corpus_table_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus");
    let table = std::fs::read_to_string(dir.join("CORPUS.md")).unwrap();
    let (mut rows, mut matches) = (0, 0);
    let mut files = std::collections::BTreeSet::new();
    let mut stale = Vec::new();
    for line in table.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 9, "seven columns: {line}");
        let (file, source, expert, recorded, matched) = (
            cells[1].trim_matches('`'),
            cells[2],
            cells[4].trim_matches('`'),
            cells[6].trim_matches('`'),
            cells[7],
        );
        assert!(files.insert(file.to_string()), "{file} twice");
        assert!(
            source.contains('@') && source.contains(':'),
            "{file}: source {source}"
        );
        assert!(well_formed(expert), "{file}: verdict {expert}");
        assert!(well_formed(recorded), "{file}: reported {recorded}");
        let now = reported(&dir.join(file));
        if now != recorded {
            stale.push(format!(
                "{file}: the table says {recorded}, tcpdoctor says {now}"
            ));
        }
        assert_eq!(
            matched,
            if expert == recorded { "yes" } else { "no" },
            "{file}: match column"
        );
        rows += 1;
        matches += usize::from(expert == now);
    }
    println!("corpus: {matches} of {rows} captures match the verdict judged by hand");
    assert!(stale.is_empty(), "stale rows:\n{}", stale.join("\n"));
    assert!(rows >= 40, "{rows} rows");
    // Every capture in the folder has a row.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        assert!(
            name == "CORPUS.md" || files.contains(&name),
            "{name} has no row in CORPUS.md"
        );
    }
}
