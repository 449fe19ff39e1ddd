//! `ssl:` remotes against ovsdb-server's SSL listener, with certificates made here.

use std::path::{Path, PathBuf};

use ovn_sandbox::{Installation, OvsdbServer, ServerOptions, SslFiles};
use ovsdb_proto::{ConnectOptions, ErrorKind, Remote, TlsConfig};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    other_ca: PathBuf,
}

fn make_ca(dir: &Path, name: &str) -> (rcgen::Certificate, KeyPair, PathBuf) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let path = dir.join(format!("{name}.pem"));
    std::fs::write(&path, cert.pem()).unwrap();
    (cert, key, path)
}

fn leaf(dir: &Path, name: &str, ca: &rcgen::Certificate, ca_key: &KeyPair) -> (PathBuf, PathBuf) {
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca, ca_key).unwrap();
    let (c, k) = (
        dir.join(format!("{name}-cert.pem")),
        dir.join(format!("{name}-key.pem")),
    );
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (c, k)
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let (ca_cert, ca_key, ca) = make_ca(dir.path(), "ca");
    let (server_cert, server_key) = leaf(dir.path(), "server", &ca_cert, &ca_key);
    let (client_cert, client_key) = leaf(dir.path(), "client", &ca_cert, &ca_key);
    let (_, _, other_ca) = make_ca(dir.path(), "other-ca");
    Pki {
        _dir: dir,
        ca,
        server_cert,
        server_key,
        client_cert,
        client_key,
        other_ca,
    }
}

fn server(pki: &Pki) -> OvsdbServer {
    let install = Installation::recent().unwrap();
    let ssl = SslFiles {
        private_key: pki.server_key.clone(),
        certificate: pki.server_cert.clone(),
        ca_cert: pki.ca.clone(),
    };
    OvsdbServer::start(
        &install,
        &ServerOptions {
            ssl: Some(ssl),
            ..Default::default()
        },
    )
    .unwrap()
}

#[tokio::test]
async fn ssl_remote_with_ca_and_client_certificate_works() {
    let pki = pki();
    let server = server(&pki);
    let remote = Remote::parse(&server.ssl_remote().unwrap()).unwrap();
    let options = ConnectOptions {
        tls: Some(TlsConfig::new(&pki.ca, &pki.client_cert, &pki.client_key)),
        ..Default::default()
    };
    let (c, _) = ovsdb_proto::connect_with(&remote, &options).await.unwrap();
    let mut dbs = c.list_dbs().await.unwrap();
    dbs.sort();
    assert_eq!(dbs, ["OVN_Northbound", "_Server"]);
    // A large reply crosses many TLS records.
    assert_eq!(
        c.get_schema("OVN_Northbound").await.unwrap().tables.len(),
        39
    );
}

#[tokio::test]
async fn a_server_signed_by_another_ca_is_refused() {
    let pki = pki();
    let server = server(&pki);
    let remote = Remote::parse(&server.ssl_remote().unwrap()).unwrap();
    let options = ConnectOptions {
        tls: Some(TlsConfig::new(
            &pki.other_ca,
            &pki.client_cert,
            &pki.client_key,
        )),
        ..Default::default()
    };
    let e = ovsdb_proto::connect_with(&remote, &options)
        .await
        .err()
        .expect("refused");
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains("TLS handshake"), "{e}");
}

#[tokio::test]
async fn ssl_without_tls_files_is_a_clear_configuration_error() {
    let remote = Remote::parse("ssl:127.0.0.1:6641").unwrap();
    let e = ovsdb_proto::connect_with(&remote, &ConnectOptions::default())
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.to_string().contains("needs a CA certificate"), "{e}");
    let options = ConnectOptions {
        tls: Some(TlsConfig::new("/nonexistent/ca.pem", "/x", "/y")),
        ..Default::default()
    };
    let e = ovsdb_proto::connect_with(&remote, &options)
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("cannot open /nonexistent/ca.pem"),
        "{e}"
    );
}

#[tokio::test]
async fn a_client_without_a_certificate_is_turned_away_by_the_server() {
    let pki = pki();
    let server = server(&pki);
    let remote = Remote::parse(&server.ssl_remote().unwrap()).unwrap();
    let options = ConnectOptions {
        tls: Some(TlsConfig {
            ca_cert: pki.ca.clone(),
            certificate: None,
            private_key: None,
        }),
        ..Default::default()
    };
    // TLS 1.3 finishes the client's side of the handshake before the server checks the
    // certificate, so the refusal shows on the first request.
    match ovsdb_proto::connect_with(&remote, &options).await {
        Err(e) => assert_eq!(e.kind(), ErrorKind::Io, "{e}"),
        Ok((c, _)) => {
            let e = c.list_dbs().await.unwrap_err();
            assert!(
                e.is_closed() || e.is_outcome_unknown() || e.is_retryable(),
                "{e}"
            );
        }
    }
}
