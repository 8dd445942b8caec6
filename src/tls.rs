//! TLS client configuration: the TLS flags resolved (PEM files read and
//! checked before the run, so a bad file is a usage error, not a failure
//! per connection), and the rustls configuration built from them once per
//! run and shared by every worker (an `Arc` clone per worker, nothing per
//! request).

use crate::cli::RunArgs;
use crate::target::Target;
use rustls::RootCertStore;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::sign::CertifiedKey;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;

mod errors;
mod insecure;
mod observed;
mod pinned;
pub use errors::describe;
use insecure::AcceptAnyCertificate;
use observed::Observed;
pub use observed::{forget_refusal, take_refusal, verifications};

/// The TLS flags of a plan, resolved. The report shows the files by name.
#[derive(Clone, Debug, Serialize)]
pub struct TlsOptions {
    /// Accept any certificate (`--insecure`).
    pub insecure: bool,
    /// `--cacert` as given.
    pub cacert: Option<String>,
    /// Its certificates, trusted besides the system's roots.
    #[serde(skip)]
    pub extra_roots: RootCertStore,
    /// The `--cacert` certificates themselves: a server presenting one of
    /// them is trusted without a chain to a root (see `tls/pinned.rs`).
    #[serde(skip)]
    pub pinned: Vec<CertificateDer<'static>>,
    /// `--cert` and `--key` as given.
    pub cert: Option<String>,
    pub key: Option<String>,
    /// The client certificate chain and its key, for servers that ask.
    #[serde(skip)]
    pub identity: Option<Arc<CertifiedKey>>,
    /// `--sni`: the name sent and verified instead of the URL's host.
    pub sni: Option<String>,
    #[serde(skip)]
    pub server_name: Option<ServerName<'static>>,
    /// Resume sessions on new connections (off: `--no-tls-resume`).
    #[serde(rename = "tls_resume")]
    pub resume: bool,
    /// `--0rtt`: early data on resumed QUIC connections.
    #[serde(rename = "tls_0rtt")]
    pub zero_rtt: bool,
}

/// Why the TLS flags or the files they name cannot be used; files are
/// named with the flag that gave them.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--cert needs --key: the client certificate's private key (PEM)")]
    CertWithoutKey,
    #[error("--key needs --cert: the client certificate (PEM) it belongs to")]
    KeyWithoutCert,
    #[error("invalid --sni '{0}': not a DNS name or an IP address")]
    Sni(String),
    #[error("cannot read {flag} '{path}'")]
    Read {
        flag: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{flag} '{path}' is not valid PEM")]
    Pem {
        flag: &'static str,
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{flag} '{path}' holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    NoCertificate { flag: &'static str, path: String },
    #[error("--cacert '{path}': certificate {number} is not a usable CA certificate")]
    CaCertificate {
        path: String,
        number: usize,
        #[source]
        source: rustls::Error,
    },
    #[error("--key '{0}' holds no unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey(String),
    #[error("--key '{key}' is not the private key of --cert '{cert}'")]
    KeyMismatch { key: String, cert: String },
    #[error("cannot use --cert '{cert}' with --key '{key}'")]
    Identity {
        cert: String,
        key: String,
        #[source]
        source: rustls::Error,
    },
    #[error("TLS setup failed")]
    Setup(#[source] rustls::Error),
    #[error("TLS setup failed")]
    Verifier(#[source] rustls::client::VerifierBuilderError),
    #[error("invalid TLS server name '{0}'")]
    ServerName(String, #[source] rustls::pki_types::InvalidDnsNameError),
    #[error(
        "no system root certificates found to verify TLS; install ca-certificates, pass --cacert FILE or --insecure"
    )]
    NoRoots,
}

/// The TLS flags of a run, checked but not yet read: the files are only
/// named here; [`TlsOptions::load`] reads them (the plan's resolve step).
#[derive(Clone, Debug)]
pub struct TlsFlags {
    pub insecure: bool,
    pub cacert: Option<std::path::PathBuf>,
    /// `--cert` and `--key`: both or neither.
    pub identity: Option<(std::path::PathBuf, std::path::PathBuf)>,
    pub sni: Option<(String, ServerName<'static>)>,
    pub resume: bool,
    pub zero_rtt: bool,
}

impl TlsFlags {
    /// Checks the TLS flags without touching a file; every error is one line.
    pub fn from_args(args: &RunArgs) -> Result<TlsFlags, TlsError> {
        let identity = match (&args.cert, &args.key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            (Some(_), None) => return Err(TlsError::CertWithoutKey),
            (None, Some(_)) => return Err(TlsError::KeyWithoutCert),
        };
        let sni = args
            .sni
            .as_ref()
            .map(|name| {
                ServerName::try_from(name.clone())
                    .map(|server_name| (name.clone(), server_name))
                    .map_err(|_| TlsError::Sni(name.clone()))
            })
            .transpose()?;
        Ok(TlsFlags {
            insecure: args.insecure,
            cacert: args.cacert.clone(),
            identity,
            sni,
            resume: !args.no_tls_resume,
            zero_rtt: args.zero_rtt,
        })
    }

    /// The first flag given that means something only for `https://`.
    pub fn https_only_flag(&self) -> Option<&'static str> {
        [
            (self.cacert.is_some(), "--cacert"),
            (self.identity.is_some(), "--cert"),
            (self.sni.is_some(), "--sni"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

impl TlsOptions {
    /// Reads and checks the files the flags name; every error is one line.
    pub fn load(flags: &TlsFlags) -> Result<TlsOptions, TlsError> {
        let mut extra_roots = RootCertStore::empty();
        let mut pinned = Vec::new();
        if let Some(path) = &flags.cacert {
            for (i, cert) in read_certificates("--cacert", path)?.into_iter().enumerate() {
                pinned.push(cert.clone());
                extra_roots.add(cert).map_err(|source| TlsError::CaCertificate {
                    path: path.display().to_string(),
                    number: i + 1,
                    source,
                })?;
            }
        }
        let identity = match &flags.identity {
            None => None,
            Some((cert, key)) => Some(Arc::new(client_identity(cert, key)?)),
        };
        let shown = |path: Option<&std::path::PathBuf>| path.map(|p| p.display().to_string());
        Ok(TlsOptions {
            insecure: flags.insecure,
            cacert: shown(flags.cacert.as_ref()),
            extra_roots,
            pinned,
            cert: shown(flags.identity.as_ref().map(|(cert, _)| cert)),
            key: shown(flags.identity.as_ref().map(|(_, key)| key)),
            identity,
            sni: flags.sni.as_ref().map(|(name, _)| name.clone()),
            server_name: flags.sni.as_ref().map(|(_, server_name)| server_name.clone()),
            resume: flags.resume,
            zero_rtt: flags.zero_rtt,
        })
    }
}

/// Reads a file a flag names.
fn read_file(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        flag,
        path: path.display().to_string(),
        source,
    })
}

/// Every certificate in a PEM file (at least one).
fn read_certificates(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_file(flag, path)?;
    let shown = path.display().to_string();
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            flag,
            path: shown.clone(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { flag, path: shown });
    }
    Ok(certs)
}

/// `--cert` and `--key`: the chain (leaf first) and a PKCS#8, PKCS#1 or
/// SEC1 key, checked to belong together now rather than failing every
/// handshake later.
fn client_identity(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let chain = read_certificates("--cert", cert)?;
    let pem = read_file("--key", key)?;
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let der = PrivateKeyDer::from_pem_slice(&pem).map_err(|source| match source {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey(key.clone()),
        source => TlsError::Pem {
            flag: "--key",
            path: key.clone(),
            source,
        },
    })?;
    CertifiedKey::from_der(chain, der, &provider()).map_err(|source| match source {
        rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch { key, cert },
        source => TlsError::Identity { cert, key, source },
    })
}

/// The one crypto provider volley uses.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// TLS settings resolved from the plan.
#[derive(Clone)]
pub struct TlsSetup {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl TlsSetup {
    /// Verifies against the system's root certificates and `--cacert`
    /// unless `insecure`, and offers the client certificate when asked.
    /// `alpn` lists the protocols offered, most preferred first (the
    /// protocol layer above knows what it speaks; this module does not).
    pub fn new(target: &Target, options: &TlsOptions, alpn: &[&[u8]]) -> Result<TlsSetup, TlsError> {
        let provider = provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Setup)?;
        let verifier: Arc<dyn ServerCertVerifier> = if options.insecure {
            Arc::new(AcceptAnyCertificate(provider))
        } else {
            let verified = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(trust_roots(options)?),
                provider,
            )
            .build()
            .map_err(TlsError::Verifier)?;
            if options.pinned.is_empty() {
                verified
            } else {
                Arc::new(pinned::PinnedOrVerified {
                    verified,
                    pinned: options.pinned.clone(),
                })
            }
        };
        // Observed, so that QUIC, whose rustls session quinn-proto keeps to
        // itself, can tell a resumed handshake from a full one and word a
        // refused certificate as TCP does (see `tls/observed.rs`).
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Observed(verifier)));
        let mut config = match &options.identity {
            Some(identity) => builder
                .with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(identity.clone()))),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        // The session cache lives in the config, which every worker shares,
        // so a connection resumes any worker's earlier session, as a pool of
        // clients of one program would. Without it every handshake is full.
        config.resumption = if options.resume {
            rustls::client::Resumption::in_memory_sessions(256)
        } else {
            rustls::client::Resumption::disabled()
        };
        // Early data only when asked: 0-RTT requests can be replayed by an
        // attacker, which a server must allow for, and they measure
        // something other than an ordinary resumption.
        config.enable_early_data = options.zero_rtt;
        let server_name = match &options.server_name {
            Some(name) => name.clone(),
            None => ServerName::try_from(target.host.clone())
                .map_err(|e| TlsError::ServerName(target.host.clone(), e))?,
        };
        Ok(TlsSetup {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }

    /// Starts the handshake on a connected socket.
    /// The same setup offering other ALPN protocols: the roots and keys
    /// are not loaded again, and sessions stay resumable across both.
    pub fn with_alpn(&self, alpn: &[&[u8]]) -> TlsSetup {
        let mut config = rustls::ClientConfig::clone(self.connector.config());
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsSetup {
            connector: TlsConnector::from(Arc::new(config)),
            server_name: self.server_name.clone(),
        }
    }

    /// The rustls configuration itself (QUIC runs its own handshake on it).
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        self.connector.config().clone()
    }

    /// The name the server's certificate is checked against (and sent as
    /// SNI), as text.
    pub fn server_name(&self) -> String {
        self.server_name.to_str().into_owned()
    }

    pub fn handshake<IO: AsyncRead + AsyncWrite + Unpin>(&self, io: IO) -> tokio_rustls::Connect<IO> {
        self.connector.connect(self.server_name.clone(), io)
    }
}

/// The system's roots plus `--cacert`'s. Without `--cacert` a system with
/// no roots could verify nothing, which is an error; with it, the given CA
/// may be all the trust the run needs (a bare container, a private CA).
fn trust_roots(options: &TlsOptions) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 && options.extra_roots.is_empty() {
        return Err(TlsError::NoRoots);
    }
    roots.roots.extend(options.extra_roots.roots.iter().cloned());
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/tls")
            .join(name)
    }

    #[test]
    fn client_keys_in_sec1_and_pkcs1_load() {
        for name in ["sec1", "pkcs1"] {
            let identity =
                client_identity(&fixture(&format!("{name}.pem")), &fixture(&format!("{name}.key")));
            assert!(identity.is_ok(), "{name}: {:?}", identity.err());
        }
        let mismatch = client_identity(&fixture("sec1.pem"), &fixture("pkcs1.key"))
            .unwrap_err()
            .to_string();
        assert!(
            mismatch.contains("is not the private key of --cert"),
            "{mismatch}"
        );
    }
}
