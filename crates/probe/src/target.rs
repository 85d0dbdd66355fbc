//! Targets as the active commands accept them: `HOST:PORT`, `[IPV6]:PORT`, or
//! a URL (`http://host:port/path`), so one target can be pasted into `ping`,
//! `trace`, `load` and `diagnose` alike.

/// `HOST:PORT` (or `[V6]:PORT`) from a URL; anything else unchanged. The
/// scheme's port (80, 443) when the URL names none.
pub fn host_port(target: &str) -> String {
    let t = target.trim();
    let (rest, default_port) = if let Some(r) = strip_scheme(t, "http://") {
        (r, 80)
    } else if let Some(r) = strip_scheme(t, "https://") {
        (r, 443)
    } else {
        return t.to_string();
    };
    // The authority ends at the path, query or fragment; user info goes.
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{default_port}")
    }
}

fn strip_scheme<'a>(s: &'a str, scheme: &str) -> Option<&'a str> {
    (s.len() >= scheme.len() && s[..scheme.len()].eq_ignore_ascii_case(scheme))
        .then(|| &s[scheme.len()..])
}

#[cfg(test)]
mod tests {
    use super::host_port;

    #[test]
    fn urls_become_host_and_port() {
        assert_eq!(host_port("http://10.0.0.2:18080/"), "10.0.0.2:18080");
        assert_eq!(host_port("http://example.com/a/b?c"), "example.com:80");
        assert_eq!(host_port("HTTPS://example.com"), "example.com:443");
        assert_eq!(host_port("http://[::1]:8080/x"), "[::1]:8080");
        assert_eq!(host_port("http://[::1]/"), "[::1]:80");
        assert_eq!(host_port("http://u:p@h:81/"), "h:81");
        assert_eq!(host_port("10.0.0.2:80"), "10.0.0.2:80");
        assert_eq!(host_port("[::1]:80"), "[::1]:80");
    }
}
