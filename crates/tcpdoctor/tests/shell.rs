//! Completions and the manual page, generated from the command definition.

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn tcpdoctor(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn bash_completions_load_and_complete_subcommands() {
    let script = tcpdoctor(&["completions", "bash"]);
    let dir = std::env::temp_dir().join(format!("tcpdoctor-shell-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tcpdoctor.bash");
    std::fs::write(&path, script).unwrap();
    // Load it, check it is registered, and ask it what follows `tcpdoctor ana`.
    let probe = format!(
        "source {}; complete -p tcpdoctor; COMP_WORDS=(tcpdoctor ana); COMP_CWORD=1; \
         COMP_LINE='tcpdoctor ana'; COMP_POINT=13; _tcpdoctor tcpdoctor ana tcpdoctor; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("-F _tcpdoctor tcpdoctor"), "{text}");
    assert!(text.lines().any(|l| l == "analyze"), "{text}");
}

#[test]
fn zsh_and_fish_completions_name_the_subcommands() {
    for shell in ["zsh", "fish"] {
        let s = tcpdoctor(&["completions", shell]);
        for sub in ["analyze", "diagnose", "load", "lab", "watch"] {
            assert!(s.contains(sub), "{shell}: {sub}");
        }
    }
}

#[test]
fn man_pages_one_per_command_and_the_overview_names_them() {
    let page = tcpdoctor(&["man"]);
    assert!(page.starts_with(".TH TCPDOCTOR 1"), "{}", &page[..80]);
    for sub in ["analyze", "diagnose", "load", "watch", "lab"] {
        assert!(
            page.contains(&format!("\\fBtcpdoctor {sub}\\fR"))
                && page.contains(&format!("\\fB\\%tcpdoctor\\-{sub}\\fR(1)")),
            "{sub}"
        );
    }
    let analyze = tcpdoctor(&["man", "analyze"]);
    assert!(analyze.starts_with(".TH TCPDOCTOR-ANALYZE 1"));
    assert!(analyze.contains("fail\\-on\\-finding"));
    assert!(analyze.contains("\\fBtcpdoctor analyze\\fR"));
}
