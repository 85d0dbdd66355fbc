//! Real peers, when installed: nginx (`sendfile on`, `tcp_nodelay` as the
//! case sets it), the JDK's `com.sun.net.httpserver` (fixtures/src/SmallServer.java,
//! run from source), and wrk as the load client.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{bail, Context, Result};

use crate::cases::{CurlPost, Setup, TlsKey};
use crate::metrics::{round3, Metrics};
use crate::ns;
use crate::peers::ClientResult;
use crate::topo::server_addr;

const SMALL_SERVER: &str = include_str!("../../../fixtures/src/SmallServer.java");
const POST_LUA: &str = include_str!("../../../fixtures/src/post100.lua");
const HTTP_SERVER_PY: &str = include_str!("../../../fixtures/src/http_server.py");

/// A running real server.
pub struct External {
    child: Child,
    dir: PathBuf,
    /// The request wrk should send: a POST of 100 bytes (JDK) or a GET.
    post: bool,
    pub what: &'static str,
}

impl External {
    /// Starts `cmd` in namespace `ns_name`, its output in `dir`'s
    /// `stdout.log` and `stderr.log`.
    fn start(
        ns_name: &str,
        mut cmd: Command,
        dir: PathBuf,
        post: bool,
        what: &'static str,
    ) -> Result<External> {
        cmd.stdin(Stdio::null())
            .stdout(fs::File::create(dir.join("stdout.log"))?)
            .stderr(fs::File::create(dir.join("stderr.log"))?);
        let child = ns::spawn_process(ns_name, cmd)?;
        Ok(External {
            child,
            dir,
            post,
            what,
        })
    }

    pub fn stop(mut self) {
        ns::stop_process(&mut self.child);
        ns::remove_dir(&self.dir);
    }

    /// The server's time so far on a CPU and runnable waiting for one (ns),
    /// summed over the threads of its process and of its children (nginx's
    /// workers): `/proc/PID/task/TID/schedstat`, the kernel's own account.
    pub fn cpu_ns(&self) -> CpuNs {
        let root = self.child.id();
        let mut pids = vec![root];
        if let Ok(dir) = fs::read_dir("/proc") {
            for entry in dir.flatten() {
                let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                    continue;
                };
                if parent_of(pid) == Some(root) {
                    pids.push(pid);
                }
            }
        }
        let mut sum = CpuNs::default();
        for pid in pids {
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                let Ok(s) = fs::read_to_string(task.path().join("schedstat")) else {
                    continue;
                };
                let mut f = s.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
                sum.on_cpu += f.next().unwrap_or(0);
                sum.waiting += f.next().unwrap_or(0);
            }
        }
        sum
    }
}

/// A process tree's time on a CPU and waiting for one (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuNs {
    pub on_cpu: u64,
    pub waiting: u64,
}

impl CpuNs {
    /// The time from `before` to `self`.
    pub fn since(self, before: CpuNs) -> CpuNs {
        CpuNs {
            on_cpu: self.on_cpu.saturating_sub(before.on_cpu),
            waiting: self.waiting.saturating_sub(before.waiting),
        }
    }
}

/// The parent of process `pid` (`/proc/PID/stat`'s fourth field, after the
/// command in parentheses, which may itself hold spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `program` is on the PATH.
pub fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

fn work_dir(what: &str) -> Result<PathBuf> {
    let dir = ns::work_dir(what)?;
    fs::create_dir_all(dir.join("html"))?;
    // nginx's workers run as an unprivileged user and read the page.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))?;
    fs::set_permissions(dir.join("html"), fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// The ~615-byte page nginx serves (the size of its default page).
fn page() -> String {
    let mut p = String::from(
        "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body>\n\
         <h1>Welcome to nginx!</h1>\n<p>",
    );
    while p.len() < 590 {
        p.push_str("tcpdoctor lab page. ");
    }
    p.push_str("</p>\n</body>\n</html>\n");
    p
}

/// nginx in the server namespace: `GET /` serves a static page with
/// `sendfile on` and the case's `tcp_nodelay` (the case's body instead when
/// it is a download of 64 KiB or more); `POST /upload` reads the whole body
/// (proxied to a local server block), through a listener with the case's
/// `rcvbuf` and `sndbuf`.
pub fn nginx(server_ns: &str, s: &Setup) -> Result<External> {
    if !installed("nginx") {
        bail!("--peer nginx: nginx is not installed (apt-get install nginx-light)");
    }
    let dir = work_dir("nginx")?;
    // The case's body when it is a download larger than the page.
    let page = match s.server.body_bytes {
        n if n >= 64 << 10 => (0..n).map(|i| b'a' + (i % 26) as u8).collect(),
        _ => page().into_bytes(),
    };
    fs::write(dir.join("html/index.html"), page)?;
    let d = dir.display();
    let rcvbuf = s
        .peer_rcvbuf
        .map(|n| format!(" rcvbuf={n}"))
        .unwrap_or_default();
    let sndbuf = s
        .server
        .sndbuf
        .map(|n| format!(" sndbuf={n}"))
        .unwrap_or_default();
    let tls = match s.tls {
        Some(key) => {
            certificate(server_ns, &dir, key)?;
            // TLS 1.2 only (its full handshake: two round trips and the
            // server's signature over its ECDHE share), and no resumption:
            // every connection pays the whole handshake.
            format!(
                "    ssl_certificate {d}/cert.pem;\n    ssl_certificate_key {d}/key.pem;\n\
                 ssl_protocols TLSv1.2;\n    \
                 ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256;\n    \
                 ssl_session_cache off;\n    ssl_session_tickets off;\n"
            )
        }
        None => String::new(),
    };
    let ssl = if s.tls.is_some() { " ssl" } else { "" };
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  types {{ text/html html; }}\n  default_type application/octet-stream;\n\
         client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
         uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         sendfile on;\n  tcp_nodelay {nodelay};\n  keepalive_timeout 65;\n  keepalive_requests 1000000;\n\
         server {{\n    listen {addr}{ssl}{rcvbuf}{sndbuf};\n{tls}    root {d}/html;\n    index index.html;\n    location / {{ }}\n\
         location /upload {{ client_max_body_size 10m; proxy_pass http://127.0.0.1:8082; }}\n  }}\n\
         server {{ listen 127.0.0.1:8082; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n",
        nodelay = if s.peer_nodelay { "on" } else { "off" },
        addr = server_addr(),
    );
    let conf_path = dir.join("nginx.conf");
    fs::write(&conf_path, conf)?;
    let mut cmd = Command::new("nginx");
    cmd.arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf_path)
        .arg("-e")
        .arg(dir.join("error.log"));
    External::start(server_ns, cmd, dir, false, "nginx")
}

/// A self-signed certificate and its key (`cert.pem`, `key.pem` in `dir`),
/// made now with `openssl req -x509` (started like the peers, so that an
/// interrupted run stops it too).
fn certificate(ns_name: &str, dir: &Path, key: TlsKey) -> Result<()> {
    if !installed("openssl") {
        bail!(
            "HTTPS needs a certificate made with openssl, which is not installed \
             (apt-get install openssl)"
        );
    }
    let mut cmd = Command::new("openssl");
    cmd.args(["req", "-x509", "-noenc", "-days", "2"])
        .args(["-subj", "/CN=tcpdoctor-lab", "-addext"])
        .arg(format!("subjectAltName=IP:{}", server_addr().ip()))
        .args(key.openssl_args())
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // RSA 4096: seconds of prime search on a busy machine.
    let out = ns::wait_output(ns::spawn_process(ns_name, cmd)?, Duration::from_secs(120))?;
    if !out.status.success() {
        bail!(
            "openssl could not make a {} certificate: {}",
            key.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// `n` HTTPS GETs from the client namespace to the nginx `e`, one curl
/// process (so one connection and one full TLS 1.2 handshake) each, one after
/// the other. curl verifies the server against its certificate alone (not
/// the system's CA bundle, whose loading would add the client's own ms to
/// every handshake). Latency: curl's `time_total`; the handshake:
/// `time_appconnect - time_connect`.
pub fn curl_https(client_ns: &str, e: &External, n: usize) -> Result<Metrics> {
    if !installed("curl") {
        bail!("this case's client is curl, which is not installed (apt-get install curl)");
    }
    let url = format!("https://{}/", server_addr());
    let mut r = ClientResult::default();
    let mut handshakes = Vec::new();
    let start = Instant::now();
    for _ in 0..n.max(1) {
        let mut cmd = Command::new("curl");
        cmd.arg("--cacert").arg(e.dir.join("cert.pem")).args([
            "-sS",
            "--tlsv1.2",
            "--tls-max",
            "1.2",
            "--max-time",
            "20",
            &url,
        ]);
        match curl_once(client_ns, cmd)? {
            Ok(c) => {
                r.latencies.push(Duration::from_secs_f64(c.total));
                handshakes.push((c.appconnect - c.connect) * 1e3);
                r.bytes_down += c.size;
            }
            Err(e) => r.errors.push(e),
        }
    }
    r.elapsed = start.elapsed();
    if r.latencies.is_empty() {
        bail!(
            "curl completed no request: {}",
            r.errors.first().map(String::as_str).unwrap_or("no error")
        );
    }
    let mut m = crate::metrics::metrics(&r, "curl");
    handshakes.sort_by(f64::total_cmp);
    m.tls_handshake_p50_ms = handshakes
        .get(handshakes.len().div_ceil(2).saturating_sub(1))
        .copied()
        .map(round3);
    m.tls_handshake_max_ms = handshakes.last().copied().map(round3);
    Ok(m)
}

/// `p.requests` POSTs of `p.bytes` from the client namespace to the
/// built-in server, one curl process (one connection) each, one after the
/// other: with `Expect: 100-continue` and curl's wait for the `100 Continue`
/// cut to 1 s (`--expect100-timeout 1`), or with the header removed.
/// Latency: curl's `time_total`.
pub fn curl_post(client_ns: &str, p: CurlPost) -> Result<Metrics> {
    if !installed("curl") {
        bail!("this case's client is curl, which is not installed (apt-get install curl)");
    }
    let dir = ns::work_dir("curl")?;
    let result = (|| {
        let body = dir.join("body.bin");
        fs::write(
            &body,
            (0..p.bytes)
                .map(|i| b'A' + (i % 26) as u8)
                .collect::<Vec<u8>>(),
        )?;
        let url = format!("http://{}/upload", server_addr());
        let expect = if p.expect {
            "Expect: 100-continue"
        } else {
            "Expect:"
        };
        let mut r = ClientResult::default();
        let start = Instant::now();
        for _ in 0..p.requests.max(1) {
            let mut cmd = Command::new("curl");
            cmd.args(["-sS", "--max-time", "20", "--expect100-timeout", "1"])
                .args(["-H", expect, "-H", "Content-Type: application/octet-stream"])
                .arg("--data-binary")
                .arg(format!("@{}", body.display()))
                .arg(&url);
            match curl_once(client_ns, cmd)? {
                Ok(c) => {
                    r.latencies.push(Duration::from_secs_f64(c.total));
                    r.bytes_up += p.bytes as u64;
                    r.bytes_down += c.size;
                }
                Err(e) => r.errors.push(e),
            }
        }
        r.elapsed = start.elapsed();
        if r.latencies.is_empty() {
            bail!(
                "curl completed no request: {}",
                r.errors.first().map(String::as_str).unwrap_or("no error")
            );
        }
        Ok(crate::metrics::metrics(&r, "curl"))
    })();
    ns::remove_dir(&dir);
    result
}

/// One line of curl's `-w` report.
struct CurlTimes {
    status: u16,
    connect: f64,
    appconnect: f64,
    total: f64,
    size: u64,
}

/// Runs one curl (`cmd`, its URL and options given) in `client_ns` and
/// reads its `-w` line: the request's times, or what curl said when it
/// failed or was not answered 200.
fn curl_once(client_ns: &str, mut cmd: Command) -> Result<std::result::Result<CurlTimes, String>> {
    cmd.args(["-o", "/dev/null", "-w"])
        .arg("%{http_code} %{time_connect} %{time_appconnect} %{time_total} %{size_download}\n")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = ns::wait_output(ns::spawn_process(client_ns, cmd)?, Duration::from_secs(30))?;
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    Ok(match parse_curl(&line) {
        Some(c) if out.status.success() && c.status == 200 => Ok(c),
        _ => Err(format!(
            "curl: {}{}",
            line.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    })
}

fn parse_curl(line: &str) -> Option<CurlTimes> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let [status, connect, appconnect, total, size] = w.as_slice() else {
        return None;
    };
    Some(CurlTimes {
        status: status.parse().ok()?,
        connect: connect.parse().ok()?,
        appconnect: appconnect.parse().ok()?,
        total: total.parse().ok()?,
        size: size.parse::<f64>().ok()? as u64,
    })
}

/// A server run from source by `program` (`--peer what`): the program
/// checked (`missing` says what is lacking), the source written as `name`
/// into a new work directory. Returns the directory and the source's path.
fn source_file(
    what: &str,
    program: &str,
    missing: &str,
    name: &str,
    text: &str,
) -> Result<(PathBuf, PathBuf)> {
    if !installed(program) {
        bail!("--peer {what}: {missing}");
    }
    let dir = work_dir(what)?;
    let src = dir.join(name);
    fs::write(&src, text)?;
    Ok((dir, src))
}

/// The JDK's HttpServer (SmallServer.java, run from source) in the server
/// namespace, with `-Dsun.net.httpserver.nodelay` as the case sets it.
pub fn jdk(server_ns: &str, s: &Setup) -> Result<External> {
    let (dir, src) = source_file(
        "jdk",
        "java",
        "java is not installed (apt-get install default-jdk-headless)",
        "SmallServer.java",
        SMALL_SERVER,
    )?;
    let mut cmd = Command::new("java");
    cmd.arg(format!("-Dsun.net.httpserver.nodelay={}", s.peer_nodelay))
        .arg("-Xshare:auto")
        .arg(&src)
        .arg(server_addr().ip().to_string())
        .arg(server_addr().port().to_string());
    External::start(server_ns, cmd, dir, true, "jdk")
}

/// The Python server (fixtures/src/http_server.py) in the server namespace,
/// answering as the case's built-in server would: think time before the
/// response, or inside it (headers first), chunked or not, Nagle as set.
pub fn python(server_ns: &str, s: &Setup) -> Result<External> {
    let (dir, src) = source_file(
        "python",
        "python3",
        "python3 is not installed",
        "http_server.py",
        HTTP_SERVER_PY,
    )?;
    let spec = &s.server;
    let mut cmd = Command::new("python3");
    cmd.arg(&src)
        .arg(server_addr().ip().to_string())
        .arg(server_addr().port().to_string())
        .arg("--body-bytes")
        .arg(spec.body_bytes.to_string())
        .arg("--think-ms")
        .arg(spec.think.as_millis().to_string())
        .arg("--think-inside-ms")
        .arg(spec.think_inside.as_millis().to_string());
    if spec.chunked {
        cmd.arg("--chunked");
    }
    if spec.nodelay {
        cmd.arg("--nodelay");
    }
    if let Some(n) = spec.listen_rcvbuf {
        cmd.arg("--rcvbuf").arg(n.to_string());
    }
    External::start(server_ns, cmd, dir, false, "python")
}

/// wrk against the running server from the client namespace; its latency
/// distribution and rate become the phase's metrics.
pub fn wrk(client_ns: &str, e: &External, connections: u32, secs: u32) -> Result<Metrics> {
    let mut cmd = Command::new("wrk");
    let threads = connections.clamp(1, 2);
    cmd.args([
        "-c",
        &connections.to_string(),
        "-t",
        &threads.to_string(),
        "-d",
        &format!("{secs}s"),
        "--latency",
    ]);
    if e.post {
        let script = e.dir.join("post100.lua");
        fs::write(&script, POST_LUA)?;
        cmd.arg("-s").arg(script);
    }
    cmd.arg(format!("http://{}/", server_addr()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = ns::spawn_process(client_ns, cmd)?;
    let out = ns::wait_output(child, Duration::from_secs(u64::from(secs) + 30))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        bail!(
            "wrk failed: {}{}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_wrk(&text).with_context(|| format!("reading wrk's output:\n{text}"))
}

/// Reads wrk's `--latency` report.
fn parse_wrk(text: &str) -> Result<Metrics> {
    let mut m = Metrics {
        client: "wrk",
        ..Metrics::default()
    };
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["50%", v] => m.latency_p50_ms = duration_ms(v)?,
            ["99%", v] => m.latency_p99_ms = duration_ms(v)?,
            ["Latency", _avg, _stdev, max, ..] => m.latency_max_ms = duration_ms(max)?,
            ["Requests/sec:", v] => m.requests_per_sec = v.parse()?,
            [n, "requests", "in", secs, ..] => {
                m.requests = n.parse()?;
                m.duration_s = duration_ms(secs.trim_end_matches(','))? / 1e3;
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => m.errors += n.parse::<u64>()?,
            // "Socket errors: connect 0, read 0, write 0, timeout 0": every count.
            ["Socket", "errors:", counts @ ..] => {
                m.errors += counts
                    .iter()
                    .filter_map(|c| c.trim_end_matches(',').parse::<u64>().ok())
                    .sum::<u64>();
            }
            _ => {}
        }
    }
    if m.requests == 0 {
        bail!("wrk reported no request");
    }
    Ok(m)
}

/// `44.01ms`, `512.00us`, `1.20s`, `2m` → milliseconds.
fn duration_ms(v: &str) -> Result<f64> {
    let split = v
        .find(|c: char| c.is_ascii_alphabetic())
        .with_context(|| format!("no unit in {v:?}"))?;
    let (num, unit) = v.split_at(split);
    let n: f64 = num.parse()?;
    let ms = match unit {
        "us" => n / 1e3,
        "ms" => n,
        "s" => n * 1e3,
        "m" => n * 60e3,
        "h" => n * 3600e3,
        _ => bail!("unknown unit in {v:?}"),
    };
    Ok(round3(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_wrk_latency_report() {
        let out = "Running 2s test @ http://10.71.2.2:8080/\n  2 threads and 100 connections\n\
  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency    44.12ms    1.37ms  48.00ms   90.00%\n\
    Req/Sec     1.13k    50.00     1.20k    80.00%\n  Latency Distribution\n     50%   44.01ms\n\
     75%   44.50ms\n     90%   45.00ms\n     99%  512.00us\n  4496 requests in 2.00s, 3.50MB read\n\
Requests/sec:   2248.11\nTransfer/sec:      1.75MB\n";
        let m = parse_wrk(out).expect("parse");
        assert_eq!(m.latency_p50_ms, 44.01);
        assert_eq!(m.latency_p99_ms, 0.512);
        assert_eq!(m.latency_max_ms, 48.0);
        assert_eq!(m.requests, 4496);
        assert_eq!(m.duration_s, 2.0);
        assert_eq!(m.requests_per_sec, 2248.11);
        assert!(parse_wrk("garbage").is_err());
    }

    #[test]
    fn reads_curl_times() {
        let c = parse_curl("200 0.000512 0.009870 0.010544 615\n").expect("parse");
        assert_eq!(c.status, 200);
        assert!((c.appconnect - c.connect - 0.009358).abs() < 1e-9);
        assert_eq!(c.size, 615);
        assert!(parse_curl("000 0.0 0.0").is_none());
        assert!(parse_curl("").is_none());
    }
}
