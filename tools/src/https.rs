//! One TLS client configuration for every HTTPS client the daemon builds: the model's, the
//! Telegram Bot API's, Matrix's, an MCP server's over HTTP, and the `http_request` and
//! `web_search` tools', and IMAP's unless `email.ca_file` adds roots of its own (lettre's SMTP
//! client makes its own setup).
//!
//! Why one: reqwest makes a certificate verifier for every client it builds, and the platform
//! verifier reads and parses the system's whole CA bundle for each (144 certificates, 220 KB of
//! PEM on this machine class), then keeps its own copy of the roots for the client's life.
//! Counted with a probe on a daemon with every channel: nine parses in its first ten seconds,
//! three of them (~5 ms each) on the start's path before READY, and one more for every client
//! a tool call or a channel's reconnection built. Now the bundle is read once, when the first
//! client is built, and every client shares that verifier and its roots.
//!
//! The configuration is the one reqwest would have made: the platform verifier over the
//! system's roots, aws-lc-rs, TLS 1.2 and 1.3, ALPN `h2` then `http/1.1`. When it cannot be made
//! (a system with no CA bundle) a client is built as before, and reqwest reports the same
//! problem where it always did — so a client that only ever speaks plain HTTP to loopback
//! behaves exactly as it did.

use std::sync::{Arc, OnceLock};

/// A client builder whose TLS is the shared configuration (see the module docs).
pub fn client_builder() -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    match shared_config() {
        Some(config) => builder.tls_backend_preconfigured(config.clone()),
        None => builder,
    }
}

/// The shared configuration without ALPN, for TLS that does not carry HTTP (IMAP); `None`
/// when the system's roots cannot be loaded (the caller sets up its own and says why).
pub fn tls_config_without_alpn() -> Option<rustls::ClientConfig> {
    shared_config().map(|config| {
        let mut config = config.clone();
        config.alpn_protocols.clear();
        config
    })
}

/// The shared configuration, made on first use; `None` if the system's roots cannot be
/// loaded (reqwest's own setup then says why).
fn shared_config() -> Option<&'static rustls::ClientConfig> {
    static CONFIG: OnceLock<Option<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| match build_config() {
            Ok(config) => Some(config),
            Err(e) => {
                tracing::warn!(error = %e, "no shared TLS configuration; each HTTPS client sets up its own");
                None
            }
        })
        .as_ref()
}

fn build_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let mut config = verifying_config(Vec::new())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A client configuration, without ALPN, that verifies servers against the system's roots
/// and `extra_roots`: the shared one has none; email's has `email.ca_file`'s. Each call
/// reads the system's CA bundle, so it is for setups that cannot share.
pub fn verifying_config(
    extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier =
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra_roots, provider.clone())?;
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    use super::*;

    /// A self-signed certificate for `localhost` (made once with openssl for this test; no
    /// system trusts it).
    const UNTRUSTED_CERT: &str = r"-----BEGIN CERTIFICATE-----
MIIBmzCCAUGgAwIBAgIUVldBJ/N1+MWCZm4t3vAvlcXp3V0wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTIwNjIzMjU1NloYDzIxMjYxMTEy
MjMyNTU2WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAR8m42685ERinHfb/9uKYmCUv/UE3iqf6CuKJWDMTDq4ZKWVrEVLEWw
1aqpxblUblFv5qfvLJz9Np8cVdzC+7oDo28wbTAdBgNVHQ4EFgQU1hwUICFY1a3G
QUFjBZu881E+F0gwHwYDVR0jBBgwFoAU1hwUICFY1a3GQUFjBZu881E+F0gwDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwCgYIKoZI
zj0EAwIDSAAwRQIhANK3Z9t+67hEHoFd4vme55dCLT68VVkP3Dg7IgL8GhLvAiBE
uMr+rHemi/lygs8a97OCE9Qb3M894pkEjEAA2ZiMDg==
-----END CERTIFICATE-----";
    const UNTRUSTED_KEY: &str = r"-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgS4xUS/KbmKsu3RlG
ruqhxHICiGg4AeZPLBzanuCRlGyhRANCAAR8m42685ERinHfb/9uKYmCUv/UE3iq
f6CuKJWDMTDq4ZKWVrEVLEWw1aqpxblUblFv5qfvLJz9Np8cVdzC+7oD
-----END PRIVATE KEY-----";

    /// Clients share the one configuration, and it verifies: a loopback server whose
    /// certificate no root vouches for is refused during the handshake, before any request.
    #[tokio::test]
    async fn every_client_shares_one_verifying_configuration() {
        let first = shared_config().expect("this machine has a CA bundle");
        assert!(std::ptr::eq(first, shared_config().expect("made once")));
        assert_eq!(
            first.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let imap = tls_config_without_alpn().expect("the same configuration");
        assert!(imap.alpn_protocols.is_empty());

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let server = std::thread::spawn(move || {
            let cert = CertificateDer::from_pem_slice(UNTRUSTED_CERT.as_bytes()).expect("PEM");
            let key = PrivateKeyDer::from_pem_slice(UNTRUSTED_KEY.as_bytes()).expect("PEM");
            let config = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("a server config");
            let (tcp, _) = listener.accept().expect("the client connects");
            let connection = rustls::ServerConnection::new(Arc::new(config)).expect("TLS");
            let mut tls = rustls::StreamOwned::new(connection, tcp);
            let mut request = [0_u8; 512];
            // The handshake fails on the client's side: nothing is read, nothing answered.
            let got_a_request = tls.read(&mut request).is_ok_and(|n| n > 0);
            if got_a_request {
                let _ = tls.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
            }
            got_a_request
        });

        let client = client_builder()
            .build()
            .expect("a client with the shared TLS");
        let err = client
            .get(format!("https://localhost:{port}/"))
            .send()
            .await
            .expect_err("an untrusted certificate is refused");
        let chain = error_chain(&err).join(" <- ");
        assert!(chain.contains("InvalidCertificate"), "{chain}");
        assert!(
            !server.join().expect("the server thread"),
            "a request got through"
        );
    }

    fn error_chain(err: &(dyn std::error::Error + 'static)) -> Vec<String> {
        std::iter::successors(Some(err), |e| e.source())
            .map(|e| format!("{e:?}"))
            .collect()
    }
}
