//! The lab's network with real namespaces (needs root: ignored unless run with
//! `--include-ignored`, as `scripts/test.sh` does as root):
//! the delay line gives the round trip asked for, the built-in peers talk
//! through it, and tearing down leaves no namespace behind. A failed check
//! panics; the topology's drop removes the namespaces on that path too.

use std::time::Duration;

use tcpdoctor_lab::peers::{self, ClientSpec, Server, ServerSpec};
use tcpdoctor_lab::run::server_addr;
use tcpdoctor_lab::{ns, topo::Topology};

#[test]
#[ignore = "needs root (network namespaces)"]
fn delay_line_round_trip_and_cleanup() {
    assert!(ns::is_root(), "needs root (network namespaces)");
    let mut t = Topology::build(true, Duration::from_millis(10)).expect("topology");
    let names = [t.client.clone(), t.router.clone(), t.server.clone()];
    let result = (|| -> tcpdoctor_lab::Result<()> {
        let server = Server::start(&t.server, server_addr(), ServerSpec::default())?;
        let rtt = peers::measure_rtt(&t.client, server_addr(), 5)?;
        assert!(
            rtt >= Duration::from_millis(19) && rtt <= Duration::from_millis(30),
            "asked 20 ms, measured {rtt:?}"
        );
        t.set_one_way(Duration::from_millis(25));
        let rtt = peers::measure_rtt(&t.client, server_addr(), 5)?;
        assert!(
            rtt >= Duration::from_millis(49) && rtt <= Duration::from_millis(60),
            "asked 50 ms, measured {rtt:?}"
        );
        let spec = ClientSpec {
            requests: 3,
            ..ClientSpec::default()
        };
        let r = peers::run_client(&t.client, server_addr(), &spec)?;
        assert_eq!(r.latencies.len(), 3);
        // Keep-alive: the 2nd and 3rd requests take one round trip each.
        assert!(
            r.latencies[1] >= Duration::from_millis(49),
            "{:?}",
            r.latencies
        );
        t.set_loss(1.0)?;
        t.clear_loss()?;
        server.stop();
        Ok(())
    })();
    t.teardown();
    result.expect("lab traffic");
    for n in names {
        assert!(
            !std::path::Path::new(&format!("/run/netns/{n}")).exists(),
            "{n} left behind"
        );
    }
}
