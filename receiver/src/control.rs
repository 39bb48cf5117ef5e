//! The control channel (`recv --control`): lets an authenticated sweep on another host give
//! every run a fresh folder under `--dest`, hash that folder from disk after the run, and
//! remove it. Only over TLS, only after the token matched, and only ever inside `--dest`:
//! folder names are run ids (32 hex digits), never paths from the peer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, BytesMut};
use shoal_pipeline::verify::Manifest;
use shoal_pipeline::writer::open_subfolder;
use shoal_proto::control::{self, Reply, Request, KIND_JSON, KIND_MANIFEST, MAX_REQUEST};
use shoal_row::metrics;
use shoal_transport::identity::tokens_match;
use std::os::fd::{AsRawFd, OwnedFd};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::baseline as tar_tcp;
use crate::hub::Hub;
use crate::probe;
use crate::read::{hello_late, read_some};
use crate::runconfig;
use crate::shared::Shared;
use crate::writefloor;

/// Whether the bytes a connection opened with are (the start of) a control opening.
pub(crate) fn looks_like_control(buf: &[u8]) -> bool {
    buf.len() >= 3 && control::CONTROL_MAGIC.starts_with(&buf[..buf.len().min(4)])
}

/// One control connection: its peer, its opening's deadline, and (TCP) a handle on its
/// socket for the path probe's TCP_INFO.
struct Conn {
    peer: SocketAddr,
    deadline: tokio::time::Instant,
    socket: Option<OwnedFd>,
}

/// Serves one control connection until the peer closes it or goes idle. `buf` holds what was
/// read so far (the opening, at least its start).
pub(crate) async fn serve<R, W>(
    ctx: Arc<Shared>,
    mut rd: R,
    mut wr: W,
    mut buf: BytesMut,
    peer: SocketAddr,
    deadline: tokio::time::Instant,
    socket: Option<OwnedFd>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let conn = Conn {
        peer,
        deadline,
        socket,
    };
    if let Err(e) = session(&ctx, &mut rd, &mut wr, &mut buf, &conn).await {
        eprintln!("{peer}: control: {e:#}");
        let _ = send_json(&mut wr, &Reply::failed(format!("{e:#}"))).await;
    }
    let _ = wr.shutdown().await;
}

async fn session<R, W>(
    ctx: &Shared,
    rd: &mut R,
    wr: &mut W,
    buf: &mut BytesMut,
    conn: &Conn,
) -> Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (peer, deadline) = (conn.peer, conn.deadline);
    let config = &ctx.config;
    if !config.control {
        bail!("this receiver does not take control connections (start it with --control)");
    }
    // The opening (and its token) under the same deadline as a data hello.
    let token = tokio::time::timeout_at(deadline, async {
        loop {
            if let Some((token, n)) = control::decode_open(buf)? {
                buf.advance(n);
                return Ok::<_, anyhow::Error>(token);
            }
            if read_some(rd, buf, config.idle_timeout).await? == 0 {
                bail!("connection closed inside the control opening");
            }
        }
    })
    .await
    .map_err(|_| hello_late(config))??;
    if !tokens_match(&token, &ctx.identity.token) {
        bail!("authentication failed: wrong token");
    }
    loop {
        let request = loop {
            match control::decode_frame(buf, MAX_REQUEST)? {
                Some((KIND_JSON, body, n)) => {
                    let req: Result<Request, _> = serde_json::from_slice(&buf[body]);
                    buf.advance(n);
                    break req.context("not a control request")?;
                }
                Some((kind, _, _)) => bail!("unexpected frame kind {kind}"),
                None => {}
            }
            if read_some(rd, buf, config.idle_timeout).await? == 0 {
                return Ok(()); // the sweep is done with us
            }
        };
        let (reply, manifest) = match request {
            // The path probe's bulk flows use the connection itself; a failure inside one
            // ends the connection.
            Request::ProbeSink { warmup_ms } => (
                probe::sink(rd, buf, warmup_ms, config.idle_timeout).await?,
                None,
            ),
            Request::ProbeSource {
                duration_ms,
                warmup_ms,
            } => (
                probe::source(
                    wr,
                    duration_ms,
                    warmup_ms,
                    conn.socket.as_ref(),
                    config.idle_timeout,
                )
                .await?,
                None,
            ),
            request => match handle(ctx, request, peer).await {
                Ok(r) => r,
                Err(e) => (Reply::failed(format!("{e:#}")), None),
            },
        };
        send_json(wr, &reply).await?;
        if let Some(m) = manifest {
            let mut out = BytesMut::new();
            control::encode_frame(KIND_MANIFEST, &m, &mut out);
            wr.write_all(&out)
                .await
                .context("cannot send the manifest")?;
        }
        wr.flush().await?;
    }
}

/// Carries out one request: the reply, and for `hash` the encoded manifest to follow it.
async fn handle(
    ctx: &Shared,
    request: Request,
    peer: SocketAddr,
) -> Result<(Reply, Option<Vec<u8>>)> {
    let dest_root = ctx.config.dest.clone();
    let hub = &ctx.hub;
    let mut reply = Reply {
        ok: true,
        ..Default::default()
    };
    match request {
        Request::Info => {
            let f = &mut reply.facts;
            f.insert("version".into(), env!("CARGO_PKG_VERSION").into());
            f.insert("kernel".into(), metrics::kernel_release());
            f.insert("host".into(), metrics::host_name());
            f.insert("dest".into(), dest_root.display().to_string());
            if dest_root.is_dir() {
                f.insert("dest_fs".into(), metrics::fs_type(&dest_root));
                if let Some(free) = metrics::free_bytes(&dest_root) {
                    f.insert("free_bytes".into(), free.to_string());
                }
            }
            f.insert("load_1m".into(), format!("{:.2}", metrics::load_avg_1m()));
            f.insert(
                "allow_baselines".into(),
                ctx.config.allow_baselines.to_string(),
            );
            // What this end has in effect (buffers, controller, metrics saving, the interface
            // towards the sweep's host with its qdisc and offloads, file system), for the
            // sweep's meta.json and its kernel-state guard. It runs `ip`, `tc` and `ethtool`.
            let dest = dest_root.clone();
            let facts = tokio::task::spawn_blocking(move || {
                shoal_row::hostfacts::HostFacts::collect(Some(peer.ip()), Some(&dest))
            })
            .await?;
            if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(&facts) {
                for (k, v) in m {
                    let text = match v {
                        serde_json::Value::String(s) => s,
                        serde_json::Value::Array(a) => a
                            .iter()
                            .filter_map(|x| x.as_str())
                            .collect::<Vec<_>>()
                            .join("; "),
                        other => other.to_string(),
                    };
                    f.entry(format!("facts.{k}")).or_insert(text);
                }
            }
            // The CPU bandwidth this process may use (cgroup), for diagnose's receiver CPU rule.
            if let Some(q) = shoal_row::hostfacts::cpu_quota_cores() {
                f.insert("cpu_quota_cores".into(), format!("{q:.3}"));
            }
            Ok((reply, None))
        }
        Request::Clock => {
            reply.wall_clock_us = metrics::wall_clock_us();
            Ok((reply, None))
        }
        Request::Counters => {
            // Read before and after each run: /proc files only.
            let f = &mut reply.facts;
            if let Some(d) = shoal_row::hostfacts::UdpDrops::read() {
                f.insert("udp_rcvbuf_errors".into(), d.rcvbuf_errors.to_string());
                f.insert("udp_in_errors".into(), d.in_errors.to_string());
            }
            if let Some(s) = shoal_row::hostfacts::cpu_steal_seconds() {
                f.insert("cpu_steal_seconds".into(), format!("{s:.2}"));
            }
            Ok((reply, None))
        }
        Request::Prepare { run_id, settings } => {
            let id = run_id_of(&run_id)?;
            // Everything that can refuse the run is checked before its folder is created,
            // and the folder is created last: a refused prepare leaves nothing behind.
            runconfig::check(&settings)?;
            hub.check_prepare(&id)?;
            let metrics = tokio::task::spawn_blocking(forget_tcp_metrics).await??;
            let folder = dest_root.join(&run_id);
            let made = folder.clone();
            tokio::task::spawn_blocking(move || -> Result<()> {
                std::fs::create_dir_all(&dest_root)
                    .with_context(|| format!("cannot create {}", dest_root.display()))?;
                // A new folder nobody wrote before: an existing one is an error, not reused.
                std::fs::create_dir(&made)
                    .with_context(|| format!("cannot create {}", made.display()))
            })
            .await??;
            if let Err(e) = hub.prepare(id, folder.clone(), settings) {
                // Another prepare of the same id (or past the cap) won the race: the folder
                // just created is this request's, and goes.
                let _ = std::fs::remove_dir(&folder);
                return Err(e);
            }
            reply.facts.insert("tcp_metrics".into(), metrics);
            reply.dest = folder.display().to_string();
            reply.in_effect = Some(runconfig::in_effect(&runconfig::apply(
                &ctx.config,
                Some(&settings),
            )));
            Ok((reply, None))
        }
        Request::Hash { run_id } => {
            let id = run_id_of(&run_id)?;
            let folder = prepared(hub, &id, &run_id)?;
            if hub.in_progress(&id) || ctx.baselines.running(&id) {
                bail!("run {run_id} is still in progress");
            }
            let t0 = Instant::now();
            let name = run_id.clone();
            let manifest = tokio::task::spawn_blocking(move || -> Result<Manifest> {
                // The folder is opened without following a symbolic link swapped in for it
                // (and must still exist), then hashed through that descriptor, so nothing
                // outside --dest can be named or hashed.
                let parent = folder.parent().unwrap_or(&folder);
                let fd = open_subfolder(parent, &name)?;
                let through = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
                let m = Manifest::build(&through, 0);
                drop(fd);
                m
            })
            .await?
            .with_context(|| format!("cannot hash run {run_id}"))?;
            reply.seconds = t0.elapsed().as_secs_f64();
            Ok((
                reply,
                Some(shoal_pipeline::manifest::encode_manifest(&manifest)),
            ))
        }
        Request::ProbeSink { .. } | Request::ProbeSource { .. } => {
            bail!("a probe flow is served by the session, not here")
        }
        Request::WriteFloor {
            run_id,
            files,
            file_bytes,
            dirs,
        } => {
            let id = run_id_of(&run_id)?;
            if hub.prepared_dest(&id).is_some() {
                bail!("run {run_id} is prepared already");
            }
            let shape = writefloor::Shape {
                files,
                file_bytes,
                dirs,
            };
            Ok((
                writefloor::measure(&ctx.config, &run_id, shape).await?,
                None,
            ))
        }
        Request::Cleanup { run_id } => {
            let id = run_id_of(&run_id)?;
            ctx.baselines.stop(&id).await;
            let folder = hub.forget(&id)?;
            tokio::task::spawn_blocking(move || shoal_pipeline::writer::remove_settled(&folder))
                .await??;
            Ok((reply, None))
        }
        Request::TarTcpStart { run_id, limit_s } => {
            let id = run_id_of(&run_id)?;
            let folder = prepared(hub, &id, &run_id)?;
            if !ctx.config.allow_baselines {
                bail!("{}", tar_tcp::NOT_ALLOWED);
            }
            if hub.in_progress(&id) {
                bail!("run {run_id} is in progress");
            }
            // A prepared run id takes one run, the baseline's as a data run's.
            hub.use_for_baseline(&id)?;
            let command = tar_tcp::tar_command(&folder).join(" ");
            let limit = Duration::from_secs(limit_s);
            let addr = ctx.baselines.start(id, folder, peer.ip(), limit).await?;
            reply.port = addr.port();
            reply.facts.insert("listen".into(), addr.to_string());
            reply.facts.insert("command".into(), command);
            Ok((reply, None))
        }
        Request::TarTcpWait { run_id, stop } => {
            let report = ctx.baselines.wait(&run_id_of(&run_id)?, stop).await?;
            if !report.ok {
                bail!("tar-tcp: {}", report.summary);
            }
            reply.facts.insert("report".into(), report.summary);
            Ok((reply, None))
        }
    }
}

fn run_id_of(s: &str) -> Result<[u8; 16]> {
    control::parse_run_id(s).ok_or_else(|| anyhow!("not a run id (32 lowercase hex digits): {s:?}"))
}

fn prepared(hub: &Hub, id: &[u8; 16], run_id: &str) -> Result<PathBuf> {
    hub.prepared_dest(id)
        .ok_or_else(|| anyhow!("run {run_id} was not prepared here"))
}

async fn send_json<W: AsyncWrite + Unpin>(wr: &mut W, reply: &Reply) -> Result<()> {
    let mut out = BytesMut::new();
    let body = serde_json::to_vec(reply).expect("a reply serializes");
    control::encode_frame(KIND_JSON, &body, &mut out);
    wr.write_all(&out)
        .await
        .context("cannot send a control reply")?;
    wr.flush().await?;
    Ok(())
}

/// No kernel TCP state from the run before (the sender's ssthresh and RTT cached here): with
/// `net.ipv4.tcp_no_metrics_save` off, this host's cached TCP metrics are flushed before each
/// prepared run; a receiver that cannot flush them (not root) refuses the run, naming the sysctl.
fn forget_tcp_metrics() -> Result<String> {
    let saved = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_no_metrics_save")
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    if saved == "1" {
        return Ok("not kept (net.ipv4.tcp_no_metrics_save = 1)".into());
    }
    let out = std::process::Command::new("ip")
        .args(["tcp_metrics", "flush", "all"])
        .output()
        .context("running ip tcp_metrics flush")?;
    if !out.status.success() {
        bail!(
            "net.ipv4.tcp_no_metrics_save is {saved:?} on this receiving host, so TCP metrics would carry from one run into the next, and `ip tcp_metrics flush` failed ({}): set the sysctl to 1 (docs/two-hosts.md) or run the receiver as root",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok("flushed before the run (net.ipv4.tcp_no_metrics_save = 0)".into())
}
