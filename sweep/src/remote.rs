//! Client of a remote receiver's control channel (`shoal recv --control`): a fresh folder per
//! run, hashing it on the receiving host, removing it. One TLS connection per request keeps
//! it simple and robust (a dropped connection costs one request, not the sweep); it is never
//! open while a run is being timed.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::{Buf, BytesMut};
use shoal_common::control::{self, Reply, Request, KIND_JSON, KIND_MANIFEST, MAX_REPLY};
use shoal_common::identity::{self, Identity, Pin};
use shoal_common::verify::Manifest;

/// How to reach and authenticate to a remote receiver.
pub struct Remote {
    addr: String,
    tls: Arc<rustls::ClientConfig>,
    token: Vec<u8>,
    timeout: Duration,
}

impl Remote {
    /// `pin` and `token_file` as in the matrix; without them, the default identity folder's
    /// (a receiver on this host, as `shoal send` does).
    pub fn new(addr: &str, pin: Option<&str>, token_file: Option<&Path>) -> Result<Remote> {
        let (pin, token) = match (pin, token_file) {
            (Some(p), Some(t)) => (
                p.parse::<Pin>().map_err(|e| anyhow::anyhow!("pin: {e}"))?,
                identity::read_token_file(t)?,
            ),
            _ => Identity::read_credentials(&Identity::default_dir())?,
        };
        Ok(Remote {
            addr: addr.to_string(),
            tls: Arc::new(identity::client_config(pin)?),
            token,
            timeout: Duration::from_secs(600),
        })
    }

    /// Host facts of the receiving side (version, kernel, host, dest_fs, free_bytes).
    pub fn info(&self) -> Result<Reply> {
        Ok(self.call(&Request::Info, false)?.0)
    }

    /// Creates the run's fresh folder; returns its path on the receiving host.
    pub fn prepare(&self, run_id: &str) -> Result<String> {
        let (r, _) = self.call(
            &Request::Prepare {
                run_id: run_id.into(),
            },
            false,
        )?;
        Ok(r.dest)
    }

    /// The run folder's manifest, hashed from disk on the receiving host, and the seconds
    /// that took there.
    pub fn hash(&self, run_id: &str) -> Result<(Manifest, f64)> {
        let (r, m) = self.call(
            &Request::Hash {
                run_id: run_id.into(),
            },
            true,
        )?;
        Ok((m.expect("asked for a manifest"), r.seconds))
    }

    pub fn cleanup(&self, run_id: &str) -> Result<()> {
        self.call(
            &Request::Cleanup {
                run_id: run_id.into(),
            },
            false,
        )
        .map(|_| ())
    }

    fn call(&self, req: &Request, manifest: bool) -> Result<(Reply, Option<Manifest>)> {
        let what = format!("control {} at {}", op_name(req), self.addr);
        self.call_inner(req, manifest).with_context(|| what)
    }

    fn call_inner(&self, req: &Request, manifest: bool) -> Result<(Reply, Option<Manifest>)> {
        let addr = self
            .addr
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {}", self.addr))?
            .next()
            .with_context(|| format!("{} resolves to nothing", self.addr))?;
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .with_context(|| format!("cannot connect to {addr}"))?;
        tcp.set_read_timeout(Some(self.timeout))?;
        tcp.set_write_timeout(Some(Duration::from_secs(60)))?;
        let conn = rustls::ClientConnection::new(self.tls.clone(), identity::server_name())?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let mut out = BytesMut::new();
        control::encode_open(&self.token, &mut out);
        control::encode_frame(KIND_JSON, &serde_json::to_vec(req)?, &mut out);
        tls.write_all(&out)?;
        tls.flush()?;
        let mut buf = BytesMut::new();
        let reply: Reply = match next_frame(&mut tls, &mut buf)? {
            (KIND_JSON, body) => serde_json::from_slice(&body).context("bad control reply")?,
            (k, _) => bail!("unexpected frame kind {k}"),
        };
        if !reply.ok {
            bail!("the receiver says: {}", reply.error);
        }
        let m = if manifest {
            match next_frame(&mut tls, &mut buf)? {
                (KIND_MANIFEST, body) => Some(control::decode_manifest(&body)?),
                (k, _) => bail!("expected a manifest, got frame kind {k}"),
            }
        } else {
            None
        };
        tls.conn.send_close_notify();
        let _ = tls.flush();
        Ok((reply, m))
    }
}

fn op_name(req: &Request) -> &'static str {
    match req {
        Request::Info => "info",
        Request::Prepare { .. } => "prepare",
        Request::Hash { .. } => "hash",
        Request::Cleanup { .. } => "cleanup",
    }
}

fn next_frame<R: Read>(rd: &mut R, buf: &mut BytesMut) -> Result<(u8, Vec<u8>)> {
    loop {
        if let Some((kind, body, n)) = control::decode_frame(buf, MAX_REPLY)? {
            let out = (kind, buf[body].to_vec());
            buf.advance(n);
            return Ok(out);
        }
        let mut chunk = [0u8; 64 << 10];
        let n = rd.read(&mut chunk).context("control connection failed")?;
        if n == 0 {
            bail!("the receiver closed the control connection");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
