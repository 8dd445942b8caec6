//! What runs over HTTP/2 also runs over HTTP/3, against the embedded
//! target's HTTP/3 (`volley serve --tls --http3`): load stages in both
//! models, shards and their merge (and its thresholds), and the metric
//! outputs; and the note `-v` gives where that server advertises HTTP/3
//! to a run without `--http3`. Client certificates and SNI go over QUIC
//! to a QUIC server of the test's own (quinn and h3 on a rustls
//! configuration the test makes, as `tls.rs` does for TCP), which can
//! require a certificate and tells what name the client sent.

use super::http3::{h3_run, h3_target, h3_url};
use super::metrics::{samples, scrape_while_running};
use super::otlp::{self, Collector};
use super::receivers::{Prometheus, free_port, prometheus_installed};
use super::shard::{merge, run_shards};
use super::support::{
    exclusive, num, read_report, stderr, summary, target, timed, volley_json, wait_for_stats,
};
use super::tls::{
    Leaf, Pki, Server, all_ok, all_tls_errors, provider, serve, serve_on_thread, server_config,
};
use bytes::Bytes;
use rcgen::ExtendedKeyUsagePurpose;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio_rustls::rustls;

/// A column of a run's series: `key` in each interval.
fn column(run: &Value, key: &str) -> Vec<f64> {
    let rows = run["series"].as_array().expect("a run has a series");
    rows.iter().map(|row| num(&row[key])).collect()
}

#[test]
fn stages_ramp_quic_connections_and_the_rate() {
    let _alone = timed();
    let server = h3_target();
    let staged = |stages: &str, more: &[&str], path: &str| {
        let url = h3_url(&server, path);
        let mut args = vec!["--stages", stages, "--interval", "500ms", url.as_str()];
        args.splice(0..0, more.iter().copied());
        h3_run(&args)
    };

    // The closed model's stages ramp the connections.
    let report = staged("1s:6,1s:6", &[], "/sleep/10");
    let run = &report["runs"][0];
    assert_eq!(&column(run, "load")[..4], &[3.0, 6.0, 6.0, 6.0]);
    // Half-way up the ramp a quarter of the connections are busy on
    // average; at the top all six are (about 550 req/s on 10 ms).
    let rps = column(run, "rps");
    assert!(rps[3] > 2.0 * rps[0] && rps[3] > 300.0, "{rps:?}");
    let s = summary(&report);
    assert_eq!(num(&s["errors"]), 0.0, "{s}");
    assert_eq!(column(run, "requests").iter().sum::<f64>(), num(&s["requests"]));
    // One QUIC connection for each connection the stages reached.
    let stats = wait_for_stats(&server, |st| st.requests_completed >= num(&s["ok"]) as u64);
    assert_eq!(stats.h3_connections, 6, "{stats:?}");
    assert_eq!(num(&s["tls"]["handshakes"]), 6.0, "{s}");

    // The open model's ramp the rate: 0 -> 600 req/s over 1 s sends 300,
    // then 600 more.
    let report = staged("1s:600,1s:600", &["-R", "-c", "4", "--streams", "4"], "/hi");
    let s = summary(&report);
    let sent = num(&s["requests"]);
    assert!((sent - 900.0).abs() <= 15.0, "{sent}");
    assert_eq!(num(&s["errors"]), 0.0, "{s}");
    let run = &report["runs"][0];
    // The first half second averages 150 req/s, the second 450, then 600.
    let rps = column(run, "rps");
    assert!((rps[0] - 150.0).abs() < 30.0, "{rps:?}");
    assert!((rps[1] - 450.0).abs() < 45.0, "{rps:?}");
    assert!((rps[2] - 600.0).abs() < 45.0, "{rps:?}");
    assert_eq!(column(run, "load")[2], 600.0);
}

/// Two shards as separate processes, each with its own QUIC connections to
/// one target: the merge adds up to the whole run, exactly.
#[test]
fn two_http3_shards_merge_to_exact_counts() {
    let server = h3_target();
    let dir = tempfile::tempdir().unwrap();
    let target_url = h3_url(&server, "/hi");
    let paths = run_shards(
        dir.path(),
        2,
        &[
            "run",
            "--http3",
            "--insecure",
            &target_url,
            "-n",
            "2000",
            "-c",
            "4",
            "--streams",
            "4",
            "-t",
            "1",
        ],
    );
    for path in &paths {
        let shard = read_report(path);
        assert_eq!(shard["runs"][0]["protocol"], "h3");
        assert_eq!(shard["plan"]["requests"], 1000);
        assert_eq!(summary(&shard)["ok"], 1000);
    }
    // Thresholds judge the merged run: one that holds, one that cannot.
    let merged_path = dir.path().join("merged.json");
    let out = merge(
        &paths,
        &[
            "--threshold",
            "errors<1%",
            "--threshold",
            "rps<1",
            "-o",
            merged_path.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let merged = read_report(&merged_path);
    let passed: Vec<&Value> = merged["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["passed"])
        .collect();
    assert_eq!(passed, [true, false]);
    let run = &merged["runs"][0];
    assert_eq!(run["protocol"], "h3");
    assert_eq!(run["summary"]["requests"], 2000);
    assert_eq!(run["summary"]["ok"], 2000);
    assert_eq!(column(run, "requests").iter().sum::<f64>(), 2000.0);
    assert_eq!(merged["plan"]["requests"], 2000);
    // Two QUIC connections per shard, each one handshake.
    assert_eq!(num(&run["summary"]["tls"]["handshakes"]), 4.0);
    let stats = wait_for_stats(&server, |st| st.requests_completed >= 2000);
    assert_eq!((stats.requests_completed, stats.h3_connections), (2000, 4));
}

/// The scrape endpoint during an HTTP/3 run: its counts grow and the open
/// connections are the QUIC connections; where Prometheus is installed,
/// remote write gets the run's exact totals too.
#[test]
fn metric_outputs_record_an_http3_run() {
    let _alone = timed();
    let server = h3_target();
    let prometheus = prometheus_installed().then(|| Prometheus::start(true));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let id = format!("h3-{}", std::process::id());
    let mut args = vec![
        "run".to_string(),
        "--http3".into(),
        "--insecure".into(),
        "-R".into(),
        "300".into(),
        "-d".into(),
        "3s".into(),
        "-c".into(),
        "2".into(),
        "--streams".into(),
        "2".into(),
        "-q".into(),
        "--interval".into(),
        "500ms".into(),
        "--run-id".into(),
        id.clone(),
        "--metrics-addr".into(),
        addr.to_string(),
        "-o".into(),
        path.to_str().unwrap().into(),
    ];
    if let Some(prometheus) = &prometheus {
        args.extend(["--out".into(), format!("prometheus={}", prometheus.write_url())]);
    }
    args.push(h3_url(&server, "/hi"));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pages = scrape_while_running(&mut child, addr);
    let report = read_report(&path);
    assert_eq!(report["runs"][0]["protocol"], "h3");
    let total = num(&summary(&report)["requests"]);
    let requests: Vec<f64> = pages
        .iter()
        .map(|p| samples(p, "volley_requests_total")[0])
        .collect();
    assert!(requests.len() >= 2, "scraped {requests:?}");
    assert!(
        requests.windows(2).all(|w| w[0] <= w[1]) && requests[0] < requests[requests.len() - 1],
        "counts grow: {requests:?}"
    );
    assert!(requests.iter().all(|r| *r <= total), "{requests:?} vs {total}");
    // Two QUIC connections, each a connected UDP socket to the target.
    let connections: Vec<f64> = pages
        .iter()
        .flat_map(|p| samples(p, "volley_open_connections"))
        .collect();
    if cfg!(target_os = "linux") {
        assert!(connections.contains(&2.0), "{connections:?}");
        assert!(connections.iter().all(|n| *n <= 2.0), "{connections:?}");
    }
    if let Some(prometheus) = prometheus {
        let run = format!("run=\"{id}\"");
        assert_eq!(
            prometheus.value(&format!("sum(volley_requests_total{{{run}}})")),
            total
        );
        assert_eq!(
            prometheus.value(&format!("volley_responses_total{{{run},status=\"200\"}}")),
            num(&summary(&report)["ok"])
        );
    }
}

/// OTLP during an HTTP/3 run: a real OpenTelemetry Collector gets the
/// run's exact totals, as after a run over TCP (see `otlp.rs`).
#[test]
fn an_opentelemetry_collector_receives_an_http3_run_s_totals() {
    let Some(collector) = Collector::start() else {
        return;
    };
    let _alone = exclusive();
    let server = h3_target();
    let report = h3_run(&[
        "-n",
        "5000",
        "-c",
        "4",
        "--streams",
        "4",
        "--interval",
        "200ms",
        "--run-id",
        "otlp-h3",
        "--out",
        &format!("otlp=http://{}", collector.addr),
        &h3_url(&server, "/hi"),
    ]);
    let lines = collector.stop();
    otlp::all_delivered(&report, &lines);
    let s = summary(&report);
    assert_eq!((num(&s["requests"]), num(&s["ok"])), (5000.0, 5000.0), "{s}");

    let requests = otlp::points(&lines, "volley.requests");
    let last = requests.last().expect("volley.requests arrived");
    assert_eq!(otlp::attribute(last, "run"), Some("otlp-h3"));
    assert_eq!(otlp::int(&last["asInt"]), 5000);
    let ok = otlp::points(&lines, "volley.responses");
    let ok = ok
        .iter()
        .rfind(|p| otlp::attribute(p, "status") == Some("200"))
        .expect("volley.responses for 200 arrived");
    assert_eq!(otlp::int(&ok["asInt"]), 5000);
    let durations = otlp::points(&lines, "volley.request.duration");
    let hist = durations.last().expect("volley.request.duration arrived");
    assert_eq!(otlp::int(&hist["count"]), 5000);
    assert!(
        otlp::points(&lines, "volley.request.errors").is_empty(),
        "nothing failed"
    );
}

/// An HTTP/3 server of the test's own (quinn and h3) on a free loopback UDP
/// port with `config` (its ALPN set to `h3`), answering every request with
/// `ok`; `accepted` counts the connections whose handshake completed. It
/// lives until the test ends.
fn serve_h3(mut config: rustls::ServerConfig) -> Server {
    config.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(config).expect("a TLS 1.3 config");
    let server_config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    serve_on_thread(addr, move |counter| async move {
        let runtime = quinn::default_runtime().expect("inside a tokio runtime");
        let endpoint =
            quinn::Endpoint::new(Default::default(), Some(server_config), socket, runtime).unwrap();
        while let Some(incoming) = endpoint.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                // A handshake the server refused (no client certificate)
                // ends here, uncounted.
                let Ok(quic) = incoming.await else { return };
                counter.fetch_add(1, Ordering::SeqCst);
                let connection = h3_quinn::Connection::new(quic);
                let Ok(mut h3) = h3::server::builder().build::<_, Bytes>(connection).await else {
                    return;
                };
                while let Ok(Some(resolver)) = h3.accept().await {
                    tokio::spawn(async move {
                        let Ok((_, mut stream)) = resolver.resolve_request().await else {
                            return;
                        };
                        let head = http::Response::builder()
                            .status(200)
                            .header("content-length", "2")
                            .body(())
                            .unwrap();
                        if stream.send_response(head).await.is_ok()
                            && stream.send_data(Bytes::from_static(b"ok")).await.is_ok()
                        {
                            let _ = stream.finish().await;
                        }
                    });
                }
            });
        }
    })
}

#[test]
fn a_client_certificate_goes_over_quic() {
    let pki = Pki::new();
    pki.issue(
        &["volley client"],
        ExtendedKeyUsagePurpose::ClientAuth,
        Some("client"),
    );
    let server = serve_h3(pki.requiring_client_certs(pki.server_leaf(&["127.0.0.1"])));
    let url = format!("https://127.0.0.1:{}/", server.port());
    let (cert, key, ca) = (pki.path("client.pem"), pki.path("client.key"), pki.ca_file());
    let report = all_ok(
        20,
        &[
            "--http3", "-c", "2", "--cacert", &ca, "--cert", &cert, "--key", &key, &url,
        ],
    );
    assert_eq!(report["runs"][0]["protocol"], "h3");
    assert_eq!(server.accepted(), 2, "both QUIC handshakes took the certificate");
    let example = all_tls_errors(3, &["--http3", "-c", "1", "--cacert", &ca, &url]);
    assert!(example.contains("requires a client certificate"), "{example}");
    assert_eq!(server.accepted(), 2, "no handshake completed without one");
}

/// Presents one certificate to every client and keeps the name each one
/// sent (SNI), `None` for a client that sent none.
#[derive(Debug)]
struct RecordingSni {
    certified: Arc<rustls::sign::CertifiedKey>,
    sent: Mutex<Vec<Option<String>>>,
}

impl rustls::server::ResolvesServerCert for RecordingSni {
    fn resolve(&self, hello: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let name = hello.server_name().map(str::to_string);
        self.sent.lock().unwrap().push(name);
        Some(self.certified.clone())
    }
}

impl RecordingSni {
    fn new(leaf: Leaf) -> Arc<RecordingSni> {
        let key = provider().key_provider.load_private_key(leaf.key).unwrap();
        Arc::new(RecordingSni {
            certified: Arc::new(rustls::sign::CertifiedKey::new(leaf.chain, key)),
            sent: Mutex::default(),
        })
    }

    /// The names sent since last asked.
    fn take(&self) -> Vec<Option<String>> {
        std::mem::take(&mut self.sent.lock().unwrap())
    }
}

#[test]
fn sni_over_quic_is_sent_and_names_the_certificate_to_verify() {
    let pki = Pki::new();
    let names = RecordingSni::new(pki.server_leaf(&["volley.test"]));
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(names.clone());
    let server = serve_h3(config);
    let url = format!("https://127.0.0.1:{}/", server.port());
    let ca = pki.ca_file();
    // One connection at a time, the name checked against the test CA's
    // certificate for volley.test.
    let naming = |sni: &[&'static str]| {
        let mut args = vec!["--http3", "-c", "1", "--cacert", ca.as_str(), url.as_str()];
        args.splice(0..0, sni.iter().copied());
        args
    };
    let report = all_ok(10, &naming(&["--sni", "volley.test"]));
    assert_eq!(report["runs"][0]["protocol"], "h3");
    assert_eq!(report["plan"]["sni"], "volley.test");
    assert_eq!(names.take(), [Some("volley.test".to_string())]);
    // Without --sni the URL's address is checked (and, an address, not sent).
    let example = all_tls_errors(2, &naming(&[]));
    assert!(example.contains("127.0.0.1"), "{example}");
    assert!(names.take().iter().all(Option::is_none));
    let example = all_tls_errors(2, &naming(&["--sni", "wrong.example"]));
    assert!(example.contains("wrong.example"), "{example}");
    let sent = names.take();
    assert!(
        sent.iter().all(|n| n.as_deref() == Some("wrong.example")),
        "{sent:?}"
    );
}

/// A certificate volley refuses reads the same over QUIC as over TCP: the
/// embedded target's own (self-signed), untrusted, then trusted with
/// `--cacert` but checked against another name.
#[test]
fn a_refused_certificate_reads_the_same_over_quic_as_over_tcp() {
    let server = h3_target();
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("serve.pem");
    std::fs::write(&pem, server.cert_pem().expect("a TLS target")).unwrap();
    let url = h3_url(&server, "/hi");
    // The same run over TCP, then over QUIC: both examples.
    let both = |flags: &[&str]| {
        let mut args = vec!["-c", "1"];
        args.extend_from_slice(flags);
        args.push(url.as_str());
        let tcp = all_tls_errors(2, &args);
        args.insert(0, "--http3");
        (tcp, all_tls_errors(2, &args))
    };
    let (tcp, quic) = both(&[]);
    assert!(
        tcp.starts_with("certificate signed by an unknown issuer"),
        "{tcp}"
    );
    assert_eq!(quic, tcp);
    let (tcp, quic) = both(&["--cacert", pem.to_str().unwrap(), "--sni", "wrong.example"]);
    assert!(
        tcp.starts_with("certificate not valid for name \"wrong.example\": it is for \"localhost\""),
        "{tcp}"
    );
    assert_eq!(quic, tcp);
}

/// An expired certificate, from a test CA the run trusts, served over TCP
/// and over QUIC: the same words, with the date it expired.
#[test]
fn an_expired_certificate_reads_the_same_over_quic_as_over_tcp() {
    let pki = Pki::new();
    let leaf = pki.expired_server_leaf(&["127.0.0.1"]);
    let copy = Leaf {
        chain: leaf.chain.clone(),
        key: leaf.key.clone_key(),
    };
    let over_tcp = serve(server_config(leaf));
    let over_quic = serve_h3(server_config(copy));
    let ca = pki.ca_file();
    let url = |server: &Server| format!("https://127.0.0.1:{}/", server.port());
    let tcp = all_tls_errors(2, &["-c", "1", "--cacert", &ca, &url(&over_tcp)]);
    assert_eq!(
        tcp,
        "certificate expired: it was valid until 2020-01-01T00:00:00Z (--insecure skips the check)"
    );
    let quic = all_tls_errors(2, &["--http3", "-c", "1", "--cacert", &ca, &url(&over_quic)]);
    assert_eq!(quic, tcp);
}

/// Without `--http3` a server's HTTP/3 advert changes nothing but what
/// `-v` says at the end: one note, however many responses carried it.
#[test]
fn verbose_notes_a_servers_http3_advert_once() {
    let server = h3_target();
    let url = h3_url(&server, "/hi");
    let note = format!(
        "note: the server offers HTTP/3 (Alt-Svc: h3 on UDP port {}); --http3 would use it",
        server.addr().port()
    );
    // Over HTTP/1.1 every response says it; over HTTP/2 the first response
    // of each connection is looked at.
    for (protocol, named) in [
        (&["--http1.1"][..], "http/1.1"),
        (&["--http2", "--streams", "4"], "h2"),
    ] {
        let mut args = vec!["run", "--insecure", "-v", "-n", "200", "-c", "2", url.as_str()];
        args.splice(1..1, protocol.iter().copied());
        let (out, report) = volley_json(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.matches(&note).count(), 1, "{protocol:?}: {err}");
        assert_eq!(report["runs"][0]["protocol"], named);
        assert_eq!(summary(&report)["ok"], 200);
    }
    assert_eq!(server.stats().h3_connections, 0, "nothing switched to QUIC");
    // Not without -v, nor where nothing is offered.
    let (out, _) = volley_json(&["run", "--insecure", "-n", "20", &url]);
    assert!(!stderr(&out).contains("HTTP/3"), "{}", stderr(&out));
    let plain = target();
    let (out, _) = volley_json(&["run", "-v", "-n", "20", &super::support::url(&plain, "/hi")]);
    assert!(!stderr(&out).contains("HTTP/3"), "{}", stderr(&out));
}
