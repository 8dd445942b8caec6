//! TLS failures in the user's terms, for the report's error examples.
//!
//! rustls' own text names enum variants ("invalid peer certificate:
//! UnknownIssuer", "received fatal alert: CertificateRequired"); the cases a
//! load test meets most (an untrusted certificate, the wrong name, one past
//! or before its validity, a server that wants a client certificate) say
//! here what is wrong and which flag changes it. Anything else keeps
//! rustls' text. Over QUIC too: see `refused.rs`.

use rustls::{AlertDescription as Alert, CertificateError, Error};

/// One line describing a TLS failure.
pub fn describe(err: &Error) -> String {
    match err {
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "certificate signed by an unknown issuer: neither the system roots nor --cacert \
             vouch for it (--insecure skips the check)"
                .to_string()
        }
        Error::InvalidCertificate(CertificateError::NotValidForNameContext { expected, presented }) => {
            format!(
                "certificate not valid for name {:?}: it is for {} (--sni sets the name to check)",
                expected.to_str(),
                names(presented)
            )
        }
        // What `openssl req -x509` makes by default (CA:TRUE); webpki's
        // reason reaches us only as the text of rustls' catch-all.
        Error::InvalidCertificate(CertificateError::Other(other))
            if other.to_string() == "CaUsedAsEndEntity" =>
        {
            "the server's certificate is a CA certificate (a self-signed test certificate?): \
             pass --insecure, or serve one its CA issued and pass --cacert"
                .to_string()
        }
        // rustls says when it checked and the certificate's limit, both
        // as seconds since 1970: the limit is the news, as a date.
        Error::InvalidCertificate(CertificateError::ExpiredContext { not_after, .. }) => format!(
            "certificate expired: it was valid until {} (--insecure skips the check)",
            date(not_after.as_secs())
        ),
        Error::InvalidCertificate(CertificateError::Expired) => {
            "certificate expired (--insecure skips the check)".to_string()
        }
        Error::InvalidCertificate(CertificateError::NotValidYetContext { not_before, .. }) => format!(
            "certificate not valid yet: it is valid from {}; is this machine's clock right? \
             (--insecure skips the check)",
            date(not_before.as_secs())
        ),
        Error::InvalidCertificate(CertificateError::NotValidForName) => {
            "certificate not valid for the server's name (--sni sets the name to check)".to_string()
        }
        Error::AlertReceived(Alert::CertificateRequired) => {
            "the server requires a client certificate: pass --cert and --key".to_string()
        }
        // Alerts about certificates complain about the receiver's: ours.
        Error::AlertReceived(
            alert @ (Alert::BadCertificate
            | Alert::UnsupportedCertificate
            | Alert::CertificateRevoked
            | Alert::CertificateExpired
            | Alert::CertificateUnknown
            | Alert::UnknownCA),
        ) => format!("the server rejected the client certificate (alert {alert:?})"),
        Error::AlertReceived(Alert::UnrecognisedName) => {
            "the server does not know the name sent (alert UnrecognisedName): check the URL's host or --sni"
                .to_string()
        }
        other => other.to_string(),
    }
}

/// A time given as seconds since 1970, as an RFC 3339 date in UTC.
fn date(secs: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    humantime::format_rfc3339_seconds(time).to_string()
}

/// The names a certificate presents, as webpki spells them
/// (`DnsName("a.example")`), shown as `"a.example"`.
fn names(presented: &[String]) -> String {
    if presented.is_empty() {
        return "no name at all".to_string();
    }
    presented
        .iter()
        .map(|name| {
            name.strip_prefix("DnsName(")
                .and_then(|n| n.strip_suffix(')'))
                .unwrap_or(name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{ServerName, UnixTime};
    use std::time::Duration;

    #[test]
    fn common_failures_name_the_problem_and_the_flag() {
        let unknown = describe(&Error::InvalidCertificate(CertificateError::UnknownIssuer));
        assert!(
            unknown.starts_with("certificate signed by an unknown issuer"),
            "{unknown}"
        );
        assert!(unknown.contains("--cacert"), "{unknown}");

        let mismatch = describe(&Error::InvalidCertificate(
            CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("wrong.example").unwrap(),
                presented: vec![
                    "DnsName(\"volley.test\")".to_string(),
                    "IpAddress(1.2.3.4)".to_string(),
                ],
            },
        ));
        assert_eq!(
            mismatch,
            "certificate not valid for name \"wrong.example\": it is for \"volley.test\", \
             IpAddress(1.2.3.4) (--sni sets the name to check)"
        );

        let required = describe(&Error::AlertReceived(Alert::CertificateRequired));
        assert!(required.contains("--cert and --key"), "{required}");
        let rejected = describe(&Error::AlertReceived(Alert::UnknownCA));
        assert_eq!(
            rejected,
            "the server rejected the client certificate (alert UnknownCA)"
        );
    }

    #[test]
    fn validity_periods_are_dates() {
        let expired = describe(&Error::InvalidCertificate(CertificateError::ExpiredContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(1_800_000_000)),
            not_after: UnixTime::since_unix_epoch(Duration::from_secs(1_577_836_800)),
        }));
        assert_eq!(
            expired,
            "certificate expired: it was valid until 2020-01-01T00:00:00Z (--insecure skips the check)"
        );
        let early = describe(&Error::InvalidCertificate(CertificateError::NotValidYetContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(1_577_836_800)),
            not_before: UnixTime::since_unix_epoch(Duration::from_secs(1_800_000_000)),
        }));
        assert!(
            early.starts_with("certificate not valid yet: it is valid from 2027-01-15T08:00:00Z;"),
            "{early}"
        );
    }

    #[test]
    fn others_keep_rustls_text() {
        let err = Error::AlertReceived(Alert::HandshakeFailure);
        assert_eq!(describe(&err), err.to_string());
    }
}
