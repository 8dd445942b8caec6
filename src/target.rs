//! A URL resolved into what the engine needs: where to connect, what to put
//! in the request line and Host header, and whether to speak TLS.

use serde::Serialize;
use std::net::{SocketAddr, ToSocketAddrs};
use thiserror::Error;

/// Why a URL cannot be a target.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("invalid URL '{url}': {reason}")]
    Invalid { url: String, reason: String },
    #[error("unsupported scheme '{scheme}' in '{url}': use http:// or https://")]
    Scheme { url: String, scheme: String },
    #[error("cannot resolve host '{host}' of '{url}': {reason}")]
    Resolve {
        url: String,
        host: String,
        reason: String,
    },
}

/// One URL to load, fully resolved.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub url: String,
    #[serde(skip)]
    pub tls: bool,
    /// The host name (without brackets or port), for SNI.
    #[serde(skip)]
    pub host: String,
    /// `host[:port]`, the port only when it is not the scheme's default.
    #[serde(skip)]
    pub host_header: String,
    #[serde(skip)]
    pub port: u16,
    /// `scheme://host[:port]` as written, for recognising absolute URLs.
    #[serde(skip)]
    pub origin: String,
    /// Path and query as sent in the request line.
    #[serde(skip)]
    pub path_and_query: String,
    /// Where connections go: the addresses the host resolves to, filled by
    /// [`Target::resolve`], or those of `--connect-to`.
    #[serde(skip)]
    pub addrs: Vec<SocketAddr>,
}

impl Target {
    /// Parses and checks a URL without touching the network.
    pub fn parse(raw: &str) -> Result<Target, TargetError> {
        let invalid = |reason: String| TargetError::Invalid {
            url: raw.to_string(),
            reason,
        };
        let url = url::Url::parse(raw).map_err(|e| invalid(e.to_string()))?;
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            other => {
                return Err(TargetError::Scheme {
                    url: raw.to_string(),
                    scheme: other.to_string(),
                });
            }
        };
        let host = match url.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(host) => host.to_string(),
            None => return Err(invalid("no host".to_string())),
        };
        let port = url
            .port_or_known_default()
            .ok_or_else(|| invalid("no port".to_string()))?;
        let host_header = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or(&host)),
            None => url.host_str().unwrap_or(&host).to_string(),
        };
        let mut path_and_query = url.path().to_string();
        if let Some(query) = url.query() {
            path_and_query.push('?');
            path_and_query.push_str(query);
        }
        let origin = format!("{}://{host_header}", url.scheme());
        Ok(Target {
            url: raw.to_string(),
            tls,
            host,
            host_header,
            origin,
            port,
            path_and_query,
            addrs: Vec::new(),
        })
    }

    /// Resolves the host once, before the run (no DNS on the request path).
    pub fn resolve(&mut self) -> Result<(), TargetError> {
        let resolve_err = |reason: String| TargetError::Resolve {
            url: self.url.clone(),
            host: self.host.clone(),
            reason,
        };
        let addrs: Vec<SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| resolve_err(e.to_string()))?
            .collect();
        if addrs.is_empty() {
            return Err(resolve_err("no addresses".to_string()));
        }
        self.addrs = addrs;
        Ok(())
    }
}

/// `--connect-to HOST:PORT` (`[::1]:8443` for IPv6): the addresses to
/// connect to instead of the URL's, resolved once before the run.
pub fn resolve_connect_to(text: &str) -> Result<Vec<SocketAddr>, String> {
    let usage = || format!("invalid --connect-to '{text}': use HOST:PORT, e.g. 127.0.0.1:8443");
    let (host, port) = text.rsplit_once(':').ok_or_else(usage)?;
    let host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(ipv6) => ipv6,
        // Which colon ends an unbracketed IPv6 address is anyone's guess.
        None if host.contains(':') => return Err(usage()),
        None => host,
    };
    let port: u16 = port.parse().map_err(|_| usage())?;
    if host.is_empty() || port == 0 {
        return Err(usage());
    }
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve --connect-to host '{host}': {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("cannot resolve --connect-to host '{host}': no addresses"));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_parts() {
        let t = Target::parse("https://example.test/x?y=1").unwrap();
        assert!(t.tls);
        assert_eq!(
            (t.port, t.host_header.as_str(), t.path_and_query.as_str()),
            (443, "example.test", "/x?y=1")
        );
        let t = Target::parse("http://[::1]:8080").unwrap();
        assert_eq!(
            (t.host.as_str(), t.host_header.as_str(), t.path_and_query.as_str()),
            ("::1", "[::1]:8080", "/")
        );
    }

    #[test]
    fn rejects_bad_urls() {
        assert!(matches!(
            Target::parse("ftp://x/"),
            Err(TargetError::Scheme { .. })
        ));
        assert!(matches!(
            Target::parse("not a url"),
            Err(TargetError::Invalid { .. })
        ));
        assert!(matches!(
            Target::parse("http://"),
            Err(TargetError::Invalid { .. })
        ));
    }

    #[test]
    fn connect_to_host_and_port() {
        assert_eq!(
            resolve_connect_to("127.0.0.1:8443").unwrap(),
            vec!["127.0.0.1:8443".parse().unwrap()]
        );
        assert_eq!(
            resolve_connect_to("[::1]:8443").unwrap(),
            vec!["[::1]:8443".parse().unwrap()]
        );
        for bad in [
            "127.0.0.1",
            "127.0.0.1:",
            ":8443",
            "127.0.0.1:0",
            "127.0.0.1:http",
            "::1",
        ] {
            let err = resolve_connect_to(bad).unwrap_err();
            assert!(err.contains("use HOST:PORT"), "{bad}: {err}");
        }
    }

    #[test]
    fn resolves_loopback() {
        let mut t = Target::parse("http://127.0.0.1:9/").unwrap();
        t.resolve().unwrap();
        assert_eq!(t.addrs, vec!["127.0.0.1:9".parse().unwrap()]);
    }
}
