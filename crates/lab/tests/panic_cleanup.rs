//! A panic removes the lab's namespaces (needs root: ignored unless run with
//! `--include-ignored`, as `scripts/test.sh` does as root). The release binary
//! aborts on a panic, so no `Drop` runs then: the panic hook that
//! `ns::install_signal_handler` sets does the cleanup. A test binary of its
//! own: the hook and the registry are the process's.

use std::path::Path;

use tcpdoctor_lab::ns;

#[test]
#[ignore = "needs root (network namespaces)"]
fn a_panic_removes_the_namespaces_and_processes() {
    assert!(ns::is_root(), "needs root (network namespaces)");
    ns::install_signal_handler().expect("handlers");
    let name = ns::name("panic");
    ns::create(&name).expect("namespace");
    let path = Path::new("/run/netns").join(&name);
    assert!(path.exists(), "{name} was not made");
    let mut sleeper = std::process::Command::new("sleep");
    sleeper.arg("60");
    let pid = ns::spawn_process(&name, sleeper)
        .expect("a process in it")
        .id();
    let panicked = std::thread::spawn(|| panic!("on purpose")).join();
    assert!(panicked.is_err());
    assert!(!path.exists(), "{name} is still there after the panic");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        stat.is_empty()
            || stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        "the process started in {name} still runs"
    );
}
