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
use shoal_pipeline::verify::Manifest;
use shoal_proto::control::{
    self, RecvSettings, Reply, Request, KIND_JSON, KIND_MANIFEST, MAX_REPLY,
};
use shoal_row::metrics;
use shoal_transport::identity::{self, Identity, Pin};

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
                p.parse::<Pin>()
                    .map_err(|e| anyhow::anyhow!("[link] pin {p:?}: {e}"))?,
                identity::read_token_file(t)
                    .with_context(|| format!("[link] token_file {}", t.display()))?,
            ),
            _ => Identity::read_credentials(&Identity::default_dir()).context(
                "[link] has no pin and token_file, and the default identity cannot be read",
            )?,
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

    /// The receiving host's per-run counters (`udp_rcvbuf_errors`, `udp_in_errors`,
    /// `cpu_steal_seconds`) in `facts`.
    pub fn counters(&self) -> Result<Reply> {
        Ok(self.call(&Request::Counters, false)?.0)
    }

    /// Creates the run's fresh folder; returns its path on the receiving host.
    pub fn prepare(&self, run_id: &str) -> Result<String> {
        Ok(self.prepare_run(run_id, RecvSettings::default())?.dest)
    }

    /// Creates the run's fresh folder, its data connections to run with `settings` on the
    /// receiving host; returns the folder and what the receiver has in effect for the run.
    pub fn prepare_run(&self, run_id: &str, settings: RecvSettings) -> Result<Prepared> {
        let (r, _) = self.call(
            &Request::Prepare {
                run_id: run_id.into(),
                settings,
            },
            false,
        )?;
        if r.in_effect.is_none() && !settings.is_empty() {
            // A receiver that does not know per-run settings ignores them: refuse rather
            // than record a run whose label is not what ran.
            bail!(
                "the receiver at {} does not report per-run settings (an older shoal?), so {} would not take effect there",
                self.addr,
                settings.describe()
            );
        }
        Ok(Prepared {
            dest: r.dest,
            in_effect: r.in_effect,
            tcp_metrics: r.facts.get("tcp_metrics").cloned().unwrap_or_default(),
        })
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

    /// The receiver's address, as given.
    pub fn addr(&self) -> &str {
        &self.addr
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

    /// The receiver's write floor (`write-floor`): its writers create `files` files of
    /// `file_bytes` bytes over `dirs` folders in a fresh folder `run_id`, no network, and
    /// remove it; the reply's `seconds` and `facts` (`files_per_s`, `bytes_per_s`, …).
    pub fn write_floor(
        &self,
        run_id: &str,
        files: u64,
        file_bytes: u64,
        dirs: u32,
    ) -> Result<Reply> {
        let req = Request::WriteFloor {
            run_id: run_id.into(),
            files,
            file_bytes,
            dirs,
        };
        Ok(self.call(&req, false)?.0)
    }

    /// Starts the receiving `tar -x` of a `tar-tcp` run (receiver with `--allow-baselines`);
    /// the reply's `port` is where it listens, `facts` its address and command.
    pub fn tar_tcp_start(&self, run_id: &str, limit: Duration) -> Result<Reply> {
        let req = Request::TarTcpStart {
            run_id: run_id.into(),
            limit_s: limit.as_secs().max(1),
        };
        Ok(self.call(&req, false)?.0)
    }

    /// Opens a connection and sends `req` now; its reply is read later with
    /// [`Posted::reply`]. Used to ask for the end of a `tar-tcp` run before it starts, so that
    /// the reply arrives half a round trip after the receiving tar exits, as an ssh client
    /// learns a remote command's exit (no connection set-up is timed). `wait` bounds the read.
    pub fn post(&self, req: &Request, wait: Duration) -> Result<Posted> {
        let what = format!("control {} at {}", op_name(req), self.addr);
        let (mut tls, buf) = self.connect().with_context(|| what.clone())?;
        tls.sock.set_read_timeout(Some(wait))?;
        let mut out = BytesMut::new();
        control::encode_frame(KIND_JSON, &serde_json::to_vec(req)?, &mut out);
        tls.write_all(&out).with_context(|| what.clone())?;
        tls.flush()?;
        Ok(Posted { tls, buf, what })
    }

    fn call(&self, req: &Request, manifest: bool) -> Result<(Reply, Option<Manifest>)> {
        let what = format!("control {} at {}", op_name(req), self.addr);
        self.call_inner(req, manifest).with_context(|| what)
    }

    fn call_inner(&self, req: &Request, manifest: bool) -> Result<(Reply, Option<Manifest>)> {
        let (mut tls, mut buf) = self.connect()?;
        let out = exchange(&mut tls, &mut buf, req, manifest)?;
        tls.conn.send_close_notify();
        let _ = tls.flush();
        Ok(out)
    }

    /// A TLS connection to the control channel, its opening (with the token) sent.
    pub(crate) fn connect(&self) -> Result<(TlsStream, BytesMut)> {
        let unreachable = |msg: String| Failure {
            stage: Stage::Unreachable,
            msg,
        };
        let addr = self
            .addr
            .to_socket_addrs()
            .map_err(|e| unreachable(format!("cannot resolve {}: {e}", self.addr)))?
            .next()
            .ok_or_else(|| unreachable(format!("{} resolves to nothing", self.addr)))?;
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .map_err(|e| unreachable(format!("cannot connect to {addr}: {e}")))?;
        tcp.set_read_timeout(Some(self.timeout))?;
        tcp.set_write_timeout(Some(Duration::from_secs(60)))?;
        tcp.set_nodelay(true)?;
        let conn = rustls::ClientConnection::new(self.tls.clone(), identity::server_name())?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        // The handshake on its own, so that a certificate that is not the pinned one is
        // reported as that.
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock).map_err(|e| Failure {
                stage: Stage::Handshake,
                msg: format!("TLS handshake with {addr} failed: {e}"),
            })?;
        }
        let mut out = BytesMut::new();
        control::encode_open(&self.token, &mut out);
        tls.write_all(&out)?;
        Ok((tls, BytesMut::new()))
    }

    /// The offset of the receiving host's wall clock from this one's, from `probes` clock
    /// requests on one connection: each gives an offset `t_B − (t_sent + t_answered) / 2`,
    /// wrong by at most half its round trip (when the request and the answer took very
    /// different times); the probe with the shortest round trip is kept (NTP's rule).
    pub fn clock_offset(&self, probes: usize) -> Result<ClockOffset> {
        let what = format!("control clock at {}", self.addr);
        let (mut tls, mut buf) = self.connect().with_context(|| what.clone())?;
        let mut best: Option<ClockOffset> = None;
        for _ in 0..probes.max(1) {
            let t0 = metrics::wall_clock_us();
            let (reply, _) = exchange(&mut tls, &mut buf, &Request::Clock, false)
                .with_context(|| what.clone())?;
            let t1 = metrics::wall_clock_us();
            if reply.wall_clock_us == 0 {
                bail!("{what}: the receiver does not report its clock (an older shoal?)");
            }
            let rtt = t1.saturating_sub(t0);
            // Microseconds: the clock and unit the per-file latency stamps use.
            let offset = reply.wall_clock_us as i128 - ((t0 as i128 + t1 as i128) / 2);
            let probe = ClockOffset {
                offset_ms: offset as f64 / 1e3,
                rtt_ms: rtt as f64 / 1e3,
                probes,
            };
            if best.as_ref().is_none_or(|b| probe.rtt_ms < b.rtt_ms) {
                best = Some(probe);
            }
        }
        tls.conn.send_close_notify();
        let _ = tls.flush();
        Ok(best.expect("at least one probe"))
    }
}

/// A run prepared on the receiving host.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The run's folder, as the receiving host names it.
    pub dest: String,
    /// The receiver settings the run's connections get there.
    pub in_effect: Option<RecvSettings>,
    /// What the receiving host did about its cached TCP metrics before the run.
    pub tcp_metrics: String,
}

pub(crate) type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A request sent on its own connection whose reply is still to be read.
pub struct Posted {
    tls: TlsStream,
    buf: BytesMut,
    what: String,
}

impl Posted {
    /// Blocks until the reply arrives (or the read limit given to [`Remote::post`] passes).
    pub fn reply(mut self) -> Result<Reply> {
        let reply: Reply =
            match next_frame(&mut self.tls, &mut self.buf).with_context(|| self.what.clone())? {
                (KIND_JSON, body) => serde_json::from_slice(&body).context("bad control reply")?,
                (k, _) => bail!("{}: unexpected frame kind {k}", self.what),
            };
        self.tls.conn.send_close_notify();
        let _ = self.tls.flush();
        if !reply.ok {
            bail!("{}: the receiver says: {}", self.what, reply.error);
        }
        Ok(reply)
    }
}

/// One request and its reply (and manifest) on an open control connection.
pub(crate) fn exchange(
    tls: &mut TlsStream,
    buf: &mut BytesMut,
    req: &Request,
    manifest: bool,
) -> Result<(Reply, Option<Manifest>)> {
    let mut out = BytesMut::new();
    control::encode_frame(KIND_JSON, &serde_json::to_vec(req)?, &mut out);
    tls.write_all(&out)?;
    tls.flush()?;
    let reply: Reply = match next_frame(tls, buf)? {
        (KIND_JSON, body) => serde_json::from_slice(&body).context("bad control reply")?,
        (k, _) => bail!("unexpected frame kind {k}"),
    };
    if !reply.ok {
        return Err(Failure {
            stage: Stage::Refused,
            msg: format!("the receiver says: {}", reply.error),
        }
        .into());
    }
    let m = if manifest {
        match next_frame(tls, buf)? {
            (KIND_MANIFEST, body) => Some(shoal_pipeline::manifest::decode_manifest(&body)?),
            (k, _) => bail!("expected a manifest, got frame kind {k}"),
        }
    } else {
        None
    };
    Ok((reply, m))
}

/// The receiving host's clock minus this host's, as one clock probe measured it.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ClockOffset {
    /// Receiver's wall clock − sender's (ms); subtract it from a time measured from a sender
    /// stamp to a receiver stamp.
    pub offset_ms: f64,
    /// The round trip of the probe used; the offset is exact to within half of it.
    pub rtt_ms: f64,
    /// Probes sent; the one with the shortest round trip was kept.
    pub probes: usize,
}

/// Where a control request failed, so that the sweep can say what is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Address: cannot resolve or connect.
    Unreachable,
    /// TLS: with a pinned certificate, almost always a pin that is not this receiver's.
    Handshake,
    /// The receiver answered with a refusal (wrong token, no --control, …).
    Refused,
}

/// A control request's failure, by [`Stage`].
#[derive(Debug)]
pub struct Failure {
    pub stage: Stage,
    pub msg: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Failure {}

/// Contacts the receiver before anything else of a two-host sweep and says what is wrong, as
/// what it is: the address, the pin, the token, or a receiver without `--control`.
pub fn first_contact(control: &Remote, token_file: Option<&Path>) -> Result<Reply> {
    control.info().map_err(|e| {
        let addr = &control.addr;
        let token = token_file.map_or("the default identity's token".to_string(), |t| {
            format!("the token in {}", t.display())
        });
        let what = match e.downcast_ref::<Failure>() {
            Some(f) => match f.stage {
                Stage::Unreachable => format!(
                    "cannot reach the receiver at {addr} ({f}): is `shoal recv --control` running \
                     there, and is [link] receiver its address?"
                ),
                Stage::Handshake => format!(
                    "the receiver at {addr} is not the one [link] pin names ({f}): use the pin \
                     its `shoal recv` printed"
                ),
                Stage::Refused if f.msg.contains("--control") => format!(
                    "the receiver at {addr} must run `shoal recv --control` (docs/two-hosts.md); \
                     {f}"
                ),
                Stage::Refused if f.msg.contains("token") => {
                    format!("the receiver at {addr} refused {token}; {f}")
                }
                Stage::Refused => format!("the receiver at {addr} refused the sweep; {f}"),
            },
            None => format!("asking the receiver at {addr} for its facts failed: {e:#}"),
        };
        anyhow::anyhow!(what)
    })
}

fn op_name(req: &Request) -> &'static str {
    match req {
        Request::Info => "info",
        Request::Counters => "counters",
        Request::Prepare { .. } => "prepare",
        Request::Hash { .. } => "hash",
        Request::Cleanup { .. } => "cleanup",
        Request::Clock => "clock",
        Request::ProbeSink { .. } => "probe-sink",
        Request::ProbeSource { .. } => "probe-source",
        Request::TarTcpStart { .. } => "tar-tcp-start",
        Request::TarTcpWait { .. } => "tar-tcp-wait",
        Request::WriteFloor { .. } => "write-floor",
    }
}

pub(crate) fn next_frame<R: Read>(rd: &mut R, buf: &mut BytesMut) -> Result<(u8, Vec<u8>)> {
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
