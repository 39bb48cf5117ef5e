//! TLS identity of a receiver (self-signed certificate, key, pin, token) and the rustls
//! configurations both ends use: TLS 1.3 only, ring provider, certificate pinning.

use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

/// ALPN protocol name, the same on TCP and QUIC.
pub const ALPN: &[u8] = b"shoal/1";

const CERT_FILE: &str = "cert.der";
const KEY_FILE: &str = "key.der";
const PIN_FILE: &str = "pin";
const TOKEN_FILE: &str = "token";

/// SHA-256 of a DER certificate, written `sha256:<hex>`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Pin(pub [u8; 32]);

impl Pin {
    pub fn of(cert_der: &[u8]) -> Self {
        Pin(Sha256::digest(cert_der).into())
    }
}

impl fmt::Display for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Pin {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let hex_part = s
            .trim()
            .strip_prefix("sha256:")
            .ok_or_else(|| format!("pin '{s}' must look like sha256:<64 hex digits>"))?;
        let bytes = hex::decode(hex_part).map_err(|e| format!("pin '{s}': {e}"))?;
        let arr: [u8; 32] = bytes
            .try_into()
            .map_err(|_| format!("pin '{s}' must hold 32 bytes (64 hex digits)"))?;
        Ok(Pin(arr))
    }
}

/// A receiver's identity, kept in one folder and reused across restarts.
pub struct Identity {
    pub dir: PathBuf,
    pub cert_der: Vec<u8>,
    key_der: Vec<u8>,
    pub pin: Pin,
    pub token: Vec<u8>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("dir", &self.dir)
            .field("pin", &self.pin)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// `$XDG_CONFIG_HOME/shoal/identity`, or `~/.config/shoal/identity`.
    pub fn default_dir() -> PathBuf {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("shoal").join("identity")
    }

    pub fn token_path(&self) -> PathBuf {
        self.dir.join(TOKEN_FILE)
    }

    /// Loads the identity in `dir`, creating whatever is missing (certificate and key
    /// together, token alone). The pin file is rewritten from the certificate if it differs.
    pub fn load_or_create(dir: &Path) -> Result<Self> {
        fs::create_dir_all(dir)
            .with_context(|| format!("cannot create identity folder {}", dir.display()))?;
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
        let cert_path = dir.join(CERT_FILE);
        let key_path = dir.join(KEY_FILE);
        let (cert_der, key_der) = if cert_path.exists() && key_path.exists() {
            (
                fs::read(&cert_path)
                    .with_context(|| format!("cannot read {}", cert_path.display()))?,
                fs::read(&key_path)
                    .with_context(|| format!("cannot read {}", key_path.display()))?,
            )
        } else {
            let generated = rcgen::generate_simple_self_signed(vec![
                "shoal".to_string(),
                "localhost".to_string(),
            ])
            .context("cannot generate a certificate")?;
            let cert = generated.cert.der().to_vec();
            let key = generated.signing_key.serialize_der();
            write_private(&key_path, &key)?;
            write_file(&cert_path, &cert, 0o644)?;
            (cert, key)
        };
        let pin = Pin::of(&cert_der);
        let pin_path = dir.join(PIN_FILE);
        let pin_text = format!("{pin}\n");
        if fs::read_to_string(&pin_path).ok().as_deref() != Some(pin_text.as_str()) {
            write_file(&pin_path, pin_text.as_bytes(), 0o644)?;
        }
        let token_path = dir.join(TOKEN_FILE);
        if !token_path.exists() {
            let raw: [u8; 32] = rand::random();
            write_private(&token_path, format!("{}\n", hex::encode(raw)).as_bytes())?;
        }
        let token = read_token_file(&token_path)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            cert_der,
            key_der,
            pin,
            token,
        })
    }

    /// Reads only what a sender on the same host needs: the pin and the token.
    pub fn read_credentials(dir: &Path) -> Result<(Pin, Vec<u8>)> {
        let pin_path = dir.join(PIN_FILE);
        let pin = fs::read_to_string(&pin_path)
            .with_context(|| format!("cannot read pin file {}", pin_path.display()))?
            .parse::<Pin>()
            .map_err(|e| anyhow!("{}: {e}", pin_path.display()))?;
        let token = read_token_file(&dir.join(TOKEN_FILE))?;
        Ok((pin, token))
    }

    /// rustls server configuration: TLS 1.3, this certificate, ALPN `shoal/1`.
    pub fn server_config(&self) -> Result<rustls::ServerConfig> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("TLS 1.3 unavailable")?
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(self.cert_der.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
            )
            .context("identity certificate and key do not form a usable pair")?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(config)
    }
}

/// Reads a token file: its text, surrounding white space removed.
pub fn read_token_file(path: &Path) -> Result<Vec<u8>> {
    let text =
        fs::read(path).with_context(|| format!("cannot read token file {}", path.display()))?;
    let token = text.trim_ascii().to_vec();
    if token.is_empty() {
        bail!("token file {} is empty", path.display());
    }
    if token.len() > shoal_proto::codec::MAX_TOKEN {
        bail!("token in {} is longer than 1024 bytes", path.display());
    }
    Ok(token)
}

/// Compares two tokens in time independent of where they differ.
pub fn tokens_match(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// rustls client configuration: TLS 1.3, accepts only a certificate whose SHA-256 is `pin`.
pub fn client_config(pin: Pin) -> Result<rustls::ClientConfig> {
    let provider = provider();
    let verifier = PinVerifier {
        pin,
        algorithms: provider.signature_verification_algorithms,
    };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3 unavailable")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// The server name the sender presents; the pin, not the name, authenticates the receiver.
pub fn server_name() -> ServerName<'static> {
    ServerName::try_from("shoal").expect("valid DNS name")
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

#[derive(Debug)]
struct PinVerifier {
    pin: Pin,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = Pin::of(end_entity);
        if got == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "receiver certificate pin mismatch: expected {}, receiver presented {got}",
                self.pin
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    write_file(path, bytes, 0o600)
}

/// Writes through a temporary name and renames, so a reader never sees half a file.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_once_and_reuses() {
        let t = tempfile::tempdir().unwrap();
        let a = Identity::load_or_create(t.path()).unwrap();
        let b = Identity::load_or_create(t.path()).unwrap();
        assert_eq!(a.pin, b.pin);
        assert_eq!(a.token, b.token);
        assert_eq!(a.token.len(), 64);
        let (pin, token) = Identity::read_credentials(t.path()).unwrap();
        assert_eq!(pin, a.pin);
        assert_eq!(token, a.token);
        assert_eq!(pin.to_string().parse::<Pin>().unwrap(), pin);
        a.server_config().unwrap();
        client_config(pin).unwrap();
    }

    #[test]
    fn token_comparison() {
        assert!(tokens_match(b"abc", b"abc"));
        assert!(!tokens_match(b"abc", b"abd"));
        assert!(!tokens_match(b"abc", b"ab"));
    }
}
