//! A URL resolved into what the engine needs: where to connect, what to put
//! in the request line and Host header, and whether to speak TLS.
//!
//! Credentials in the URL (`http://user:pass@host/`) become the Basic
//! `Authorization` header curl sends for them, and the URL volley shows
//! anywhere (terminal, reports, errors) has the password masked
//! (`user:***@host`): a load test's output is shared far more widely than
//! the password was meant to be.

use serde::Serialize;
use std::net::{SocketAddr, ToSocketAddrs};
use thiserror::Error;

/// Why a URL cannot be a target.
/// Every URL in a [`TargetError`] is masked by [`mask_password`].
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

/// The `Authorization` header value made from a URL's userinfo. Its
/// `Debug` shows no secret, so a plan printed for debugging leaks nothing.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicAuth(String);

impl BasicAuth {
    /// `Basic base64(user:password)`, both percent-decoded first as curl does.
    fn from_url(url: &url::Url) -> Option<BasicAuth> {
        use base64::Engine as _;
        if url.username().is_empty() && url.password().is_none() {
            return None;
        }
        let decode = |part: &str| percent_encoding::percent_decode_str(part).collect::<Vec<u8>>();
        let mut pair = decode(url.username());
        pair.push(b':');
        pair.extend(decode(url.password().unwrap_or("")));
        let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
        Some(BasicAuth(format!("Basic {encoded}")))
    }

    /// The header value, `Basic ...`.
    pub fn header_value(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BasicAuth(***)")
    }
}

/// Where the userinfo of a URL's text is: its start, and the position of
/// the `@` that ends it. Works on text that is not a valid URL too.
fn userinfo_span(raw: &str) -> Option<(usize, usize)> {
    let start = raw.find("://")? + 3;
    let authority_len = raw[start..].find(['/', '?', '#']).unwrap_or(raw.len() - start);
    // The last `@` ends the userinfo, as URL parsers read it.
    let at = raw[start..start + authority_len].rfind('@')?;
    Some((start, start + at))
}

/// `raw` with the password of its userinfo replaced by `***`
/// (`http://user:***@host/`); works on text that is not a valid URL too,
/// so error messages about bad URLs leak nothing either.
pub fn mask_password(raw: &str) -> std::borrow::Cow<'_, str> {
    let Some((start, at)) = userinfo_span(raw) else {
        return raw.into();
    };
    match raw[start..at].find(':') {
        Some(colon) => format!("{}***{}", &raw[..start + colon + 1], &raw[at..]).into(),
        None => raw.into(),
    }
}

/// `raw` without its userinfo (`http://host/`): what a plan's `{{ base }}`
/// stands for, so URLs built from it are on the run's origin (the
/// credentials travel as the `Authorization` header).
pub fn without_credentials(raw: &str) -> std::borrow::Cow<'_, str> {
    match userinfo_span(raw) {
        Some((start, at)) => format!("{}{}", &raw[..start], &raw[at + 1..]).into(),
        None => raw.into(),
    }
}

/// One URL to load, fully resolved.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// The URL as given, its password masked ([`mask_password`]): the one
    /// every output shows.
    pub url: String,
    /// `Authorization` from the URL's userinfo, sent unless the user's own
    /// headers carry one.
    #[serde(skip)]
    pub basic_auth: Option<BasicAuth>,
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
    /// The URL was given without a scheme (`127.0.0.1:3000/hi`) and is read
    /// as `http://`, as curl reads it ([`Target::parse_or_http`]).
    #[serde(skip)]
    pub scheme_assumed: bool,
}

impl Target {
    /// Parses and checks a URL without touching the network.
    pub fn parse(raw: &str) -> Result<Target, TargetError> {
        let shown = mask_password(raw).into_owned();
        let invalid = |reason: String| TargetError::Invalid {
            url: shown.clone(),
            reason,
        };
        let url = url::Url::parse(raw).map_err(|e| invalid(e.to_string()))?;
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            other => {
                return Err(TargetError::Scheme {
                    url: shown,
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
            basic_auth: BasicAuth::from_url(&url),
            url: shown,
            tls,
            host,
            host_header,
            origin,
            port,
            path_and_query,
            addrs: Vec::new(),
            scheme_assumed: false,
        })
    }

    /// A URL from the command line: as [`Target::parse`], except that one
    /// without a scheme (`127.0.0.1:3000/hi`, `localhost:3000/hi`, which
    /// the URL parser reads as a relative URL or as the scheme
    /// `localhost`) is read as `http://`, as curl reads it. Text that is no
    /// URL either way keeps the error it had as given.
    pub fn parse_or_http(raw: &str) -> Result<Target, TargetError> {
        match Target::parse(raw) {
            Err(err) if !raw.contains("://") => match Target::parse(&format!("http://{raw}")) {
                Ok(target) => Ok(Target {
                    scheme_assumed: true,
                    ..target
                }),
                Err(_) => Err(err),
            },
            parsed => parsed,
        }
    }

    /// The note shown for a URL read as `http://` ([`Target::parse_or_http`]).
    pub fn scheme_note(&self) -> Option<String> {
        self.scheme_assumed
            .then(|| format!("note: no scheme given: read as {}", self.url))
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

/// Why `--connect-to` gives no address to connect to.
#[derive(Debug, Error)]
pub enum ConnectToError {
    #[error("invalid --connect-to '{0}': use HOST:PORT, e.g. 127.0.0.1:8443")]
    Usage(String),
    #[error("cannot resolve --connect-to host '{0}'")]
    Resolve(String, #[source] std::io::Error),
    #[error("cannot resolve --connect-to host '{0}': no addresses")]
    NoAddresses(String),
}

/// `--connect-to HOST:PORT` (`[::1]:8443` for IPv6): the addresses to
/// connect to instead of the URL's, resolved once before the run.
pub fn resolve_connect_to(text: &str) -> Result<Vec<SocketAddr>, ConnectToError> {
    let (host, port) = parse_connect_to(text)?;
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| ConnectToError::Resolve(host.to_string(), e))?
        .collect();
    if addrs.is_empty() {
        return Err(ConnectToError::NoAddresses(host.to_string()));
    }
    Ok(addrs)
}

/// Checks `--connect-to HOST:PORT` without resolving it: its host and port.
pub fn parse_connect_to(text: &str) -> Result<(&str, u16), ConnectToError> {
    let usage = || ConnectToError::Usage(text.to_string());
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
    Ok((host, port))
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
    fn a_url_without_a_scheme_is_read_as_http() {
        for (raw, host_header, path) in [
            ("127.0.0.1:3000/hi", "127.0.0.1:3000", "/hi"),
            ("localhost:3000/hi", "localhost:3000", "/hi"),
            ("localhost", "localhost", "/"),
            ("[::1]:8080/x?y=1", "[::1]:8080", "/x?y=1"),
        ] {
            let t = Target::parse_or_http(raw).unwrap();
            assert!(!t.tls && t.scheme_assumed, "{raw}");
            assert_eq!(
                (t.host_header.as_str(), t.path_and_query.as_str()),
                (host_header, path)
            );
            assert_eq!(t.url, format!("http://{raw}"));
            assert_eq!(
                t.scheme_note().unwrap(),
                format!("note: no scheme given: read as http://{raw}")
            );
        }
        let given = Target::parse_or_http("https://example.test/").unwrap();
        assert!(!given.scheme_assumed && given.scheme_note().is_none());
        // What is no URL either way keeps its own error.
        assert!(matches!(
            Target::parse_or_http("not a url"),
            Err(TargetError::Invalid { .. })
        ));
        assert!(matches!(
            Target::parse_or_http("ftp://x/"),
            Err(TargetError::Scheme { .. })
        ));
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
    fn credentials_become_basic_auth_and_are_masked() {
        let t = Target::parse("http://al%20ice:p%40ss:word@example.test:8080/x").unwrap();
        assert_eq!(t.url, "http://al%20ice:***@example.test:8080/x");
        // base64("al ice:p@ss:word")
        assert_eq!(
            t.basic_auth.as_ref().map(BasicAuth::header_value),
            Some("Basic YWwgaWNlOnBAc3M6d29yZA==")
        );
        assert!(!format!("{t:?}").contains("YWwg"), "{t:?}");
        assert_eq!(t.host_header, "example.test:8080");
        assert_eq!(t.origin, "http://example.test:8080");
        let user_only = Target::parse("http://bob@example.test/").unwrap();
        assert_eq!(user_only.url, "http://bob@example.test/");
        assert_eq!(
            user_only.basic_auth.map(|a| a.header_value().to_string()),
            Some("Basic Ym9iOg==".to_string())
        );
        assert!(
            Target::parse("http://example.test/a@b")
                .unwrap()
                .basic_auth
                .is_none()
        );
    }

    #[test]
    fn masks_passwords_in_any_text() {
        for (raw, shown) in [
            ("http://u:secret@h/p", "http://u:***@h/p"),
            ("https://u:se:cr@et@h:1?q=a:b@c", "https://u:***@h:1?q=a:b@c"),
            ("ftp://u:secret@h", "ftp://u:***@h"),
            ("http://u:secret@", "http://u:***@"),
            ("http://h/a:b@c", "http://h/a:b@c"),
            ("http://u@h/", "http://u@h/"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(mask_password(raw), shown, "{raw}");
        }
        assert_eq!(without_credentials("http://u:p@h:1/x@y"), "http://h:1/x@y");
        assert_eq!(without_credentials("http://h/"), "http://h/");
        let err = Target::parse("gopher://u:secret@h/").unwrap_err().to_string();
        assert!(!err.contains("secret") && err.contains("u:***@h"), "{err}");
        let err = Target::parse("http://u:secret@[::1/").unwrap_err().to_string();
        assert!(!err.contains("secret"), "{err}");
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
            let err = resolve_connect_to(bad).unwrap_err().to_string();
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
