//! Opening the byte stream to a [`Remote`]: TCP, Unix sockets, and TLS as ovsdb-server's
//! SSL remotes use it.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::rustls::{self, client::danger, pki_types, CertificateError};

use crate::error::Error;
use crate::remote::Remote;

/// A byte stream a client can run over (also as `Box<dyn Transport>`, what [`open`]
/// returns).
pub trait Transport: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Transport for T {}

/// The TLS files an `ssl:` remote needs, as ovsdb-server's and ovn-nbctl's
/// `--ca-cert`, `--certificate` and `--private-key` give them.
///
/// The server's certificate must chain to the CA; as in Open vSwitch, its subject name
/// is not compared with the host name, since OVS PKI certificates do not carry one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM file with the CA certificate(s) that signed the server's certificate.
    pub ca_cert: PathBuf,
    /// PEM file with this client's certificate chain (ovsdb-server asks for one).
    pub certificate: Option<PathBuf>,
    /// PEM file with this client's private key.
    pub private_key: Option<PathBuf>,
}

impl TlsConfig {
    /// A configuration with a CA, a client certificate and its key.
    pub fn new(
        ca_cert: impl Into<PathBuf>,
        certificate: impl Into<PathBuf>,
        private_key: impl Into<PathBuf>,
    ) -> TlsConfig {
        TlsConfig {
            ca_cert: ca_cert.into(),
            certificate: Some(certificate.into()),
            private_key: Some(private_key.into()),
        }
    }

    fn client_config(&self) -> Result<rustls::ClientConfig, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in read_certs(&self.ca_cert)? {
            roots.add(cert).map_err(|e| {
                Error::config(format!("CA certificate {}: {e}", self.ca_cert.display()))
            })?;
        }
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| Error::config(format!("CA certificate {}: {e}", self.ca_cert.display())))?;
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::config(format!("TLS setup: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnlyVerifier { inner }));
        match (&self.certificate, &self.private_key) {
            (Some(cert), Some(key)) => {
                let chain = read_certs(cert)?;
                let key = read_key(key)?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    Error::config(format!("client certificate {}: {e}", cert.display()))
                })
            }
            (None, None) => Ok(builder.with_no_client_auth()),
            _ => Err(Error::config(
                "TLS: a client certificate and its private key must be given together",
            )),
        }
    }
}

fn read_certs(path: &Path) -> Result<Vec<pki_types::CertificateDer<'static>>, Error> {
    let file = std::fs::File::open(path)
        .map_err(|e| Error::config(format!("cannot open {}: {e}", path.display())))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut BufReader::new(file))
        .collect::<Result<_, _>>()
        .map_err(|e| {
            Error::config(format!(
                "{}: not a PEM certificate file: {e}",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(Error::config(format!(
            "{}: holds no certificate",
            path.display()
        )));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<pki_types::PrivateKeyDer<'static>, Error> {
    let file = std::fs::File::open(path)
        .map_err(|e| Error::config(format!("cannot open {}: {e}", path.display())))?;
    rustls_pemfile::private_key(&mut BufReader::new(file))
        .map_err(|e| Error::config(format!("{}: not a PEM key file: {e}", path.display())))?
        .ok_or_else(|| Error::config(format!("{}: holds no private key", path.display())))
}

/// Checks that the server's certificate chains to the CA, and not its name (see
/// [`TlsConfig`]).
#[derive(Debug)]
struct ChainOnlyVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
}

impl danger::ServerCertVerifier for ChainOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &pki_types::CertificateDer<'_>,
        intermediates: &[pki_types::CertificateDer<'_>],
        server_name: &pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: pki_types::UnixTime,
    ) -> Result<danger::ServerCertVerified, rustls::Error> {
        // The chain is verified before the name, so a name mismatch means the chain is good.
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Opens a stream to `remote`; `tls` is required for `ssl:` remotes.
pub async fn open(remote: &Remote, tls: Option<&TlsConfig>) -> Result<Box<dyn Transport>, Error> {
    match remote {
        Remote::Tcp { host, port } => {
            let s = TcpStream::connect((host.as_str(), *port))
                .await
                .map_err(|e| Error::io(std::io::Error::new(e.kind(), format!("{remote}: {e}"))))?;
            s.set_nodelay(true).map_err(Error::io)?;
            Ok(Box::new(s))
        }
        Remote::Unix(path) => {
            let s = UnixStream::connect(path)
                .await
                .map_err(|e| Error::io(std::io::Error::new(e.kind(), format!("{remote}: {e}"))))?;
            Ok(Box::new(s))
        }
        Remote::Ssl { host, port } => {
            let tls = tls.ok_or_else(|| {
                Error::config(format!(
                    "{remote}: an ssl: remote needs a CA certificate, a certificate and a private key"
                ))
            })?;
            let config = tls.client_config()?;
            let name = pki_types::ServerName::try_from(host.clone())
                .map_err(|e| Error::config(format!("{remote}: {e}")))?;
            let tcp = TcpStream::connect((host.as_str(), *port))
                .await
                .map_err(|e| Error::io(std::io::Error::new(e.kind(), format!("{remote}: {e}"))))?;
            tcp.set_nodelay(true).map_err(Error::io)?;
            let s = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await
                .map_err(|e| {
                    Error::io(std::io::Error::new(
                        e.kind(),
                        format!("{remote}: TLS handshake: {e}"),
                    ))
                })?;
            Ok(Box::new(s))
        }
    }
}
