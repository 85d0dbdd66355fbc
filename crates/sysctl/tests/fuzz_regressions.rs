//! Every input the netlink fuzz target ever crashed on (fuzz/regressions/netlink),
//! through the target's own path ([`tcpdoctor_sysctl::judge_datagram`]):
//! judged and rendered without a panic, in a build with overflow checks (the
//! fuzz target runs them too, but only in a fuzzing build).

#![allow(clippy::unwrap_used)]

use std::path::Path;

#[test]
fn inputs_the_fuzzer_crashed_on_are_judged_without_a_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/netlink");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let _ = tcpdoctor_sysctl::judge_datagram(&std::fs::read(e.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 1);
}
