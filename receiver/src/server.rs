//! The bound receiver: one address serving TCP (TLS, or plain where allowed) and QUIC, each
//! connection on its own task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use shoal_transport::config::FlowConfig;
use shoal_transport::identity::Identity;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};

use crate::config::{busy_message, ReceiverConfig};
use crate::shared::{RunOutcome, Shared};
use crate::{hub, quic, tcp};

/// Connections over the limit that may be in the middle of receiving their refusal.
const MAX_REFUSALS: usize = 16;

/// The open-files limit the receiver asks for at start (64 connections × 4,096 streams).
const OPEN_FILES_WANTED: u64 = 64 * 4096 + 4096;

/// With `--once`: how long the other connections of the run get to finish their replies.
const ONCE_GRACE: Duration = Duration::from_secs(10);

/// A bound receiver, ready to serve.
pub struct Receiver {
    listener: TcpListener,
    endpoint: quinn::Endpoint,
    udp_rcvbuf: u64,
    udp_offload: Option<shoal_transport::udp_offload::UdpOffload>,
    ctx: Arc<Shared>,
    done_rx: mpsc::UnboundedReceiver<RunOutcome>,
}

impl Receiver {
    /// Binds TCP on `listen` and UDP (QUIC) on the same port.
    pub async fn bind(
        listen: SocketAddr,
        identity: Identity,
        config: ReceiverConfig,
    ) -> Result<Self> {
        // Per-file streams keep one file open per outstanding stream (up to 64 connections ×
        // --max-streams); raise the open-files limit as far as this process may.
        shoal_pipeline::fdlimit::raise_open_files_limit(OPEN_FILES_WANTED);
        let listener = bind_tcp(listen, &config.flow)?;
        // Partial files a killed receiver left under temporary names (never under their final
        // names) are removed in the background: walking a large destination takes a while,
        // and the files of runs this process starts are never touched.
        let dest = config.dest.clone();
        std::thread::Builder::new()
            .name("shoal-temp-sweep".into())
            .spawn(
                move || match shoal_pipeline::writer::remove_stale_temps(&dest) {
                    Ok(0) => {}
                    Ok(n) => eprintln!(
                        "removed {n} temporary file(s) ({}*) that an interrupted run left under {}",
                        shoal_pipeline::writer::TEMP_PREFIX,
                        dest.display()
                    ),
                    Err(e) => eprintln!(
                        "cannot look for temporary files left under {}: {e:#}",
                        dest.display()
                    ),
                },
            )
            .context("cannot start the temporary-file sweep")?;
        let addr = listener.local_addr()?;
        let (endpoint, udp_rcvbuf, udp_offload) = quic::bind(addr, &identity, &config)?;
        let tls = tokio_rustls::TlsAcceptor::from(Arc::new(identity.server_config()?));
        let (done, done_rx) = mpsc::unbounded_channel();
        let config_slots = config.max_connections.max(1);
        Ok(Self {
            listener,
            endpoint,
            udp_rcvbuf,
            udp_offload,
            ctx: Arc::new(Shared {
                identity,
                config,
                tls,
                hub: hub::Hub::default(),
                baselines: Default::default(),
                done,
                slots: Arc::new(Semaphore::new(config_slots)),
                refusals: Arc::new(Semaphore::new(MAX_REFUSALS)),
            }),
            done_rx,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until stopped (or, with `once`, until one authenticated run ends). Returns the
    /// last run's outcome.
    pub async fn serve(mut self) -> Result<Option<RunOutcome>> {
        // Every connection's task, so `--once` can let the others of a multi-connection run
        // send their replies before the process exits.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                accepted = self.listener.accept() => match accepted {
                    Ok((tcp, peer)) => {
                        let ctx = self.ctx.clone();
                        match ctx.slots.clone().try_acquire_owned() {
                            Ok(slot) => {
                                connections.spawn(async move {
                                    tcp::handle(ctx, tcp, peer).await;
                                    drop(slot);
                                });
                            }
                            Err(_) => tcp::refuse_busy(ctx, tcp, peer),
                        }
                    }
                    Err(e) => {
                        // Out of descriptors and the like: say so, back off, keep serving.
                        eprintln!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                incoming = self.endpoint.accept() => {
                    let Some(incoming) = incoming else { anyhow::bail!("QUIC endpoint closed") };
                    let ctx = self.ctx.clone();
                    let (rcvbuf, offload) = (self.udp_rcvbuf, self.udp_offload);
                    match ctx.slots.clone().try_acquire_owned() {
                        Ok(slot) => {
                            connections.spawn(async move {
                                quic::handle(ctx, incoming, rcvbuf, offload).await;
                                drop(slot);
                            });
                        }
                        Err(_) => {
                            eprintln!("{}: refused: {}", incoming.remote_address(), busy_message(&ctx.config));
                            incoming.refuse();
                        }
                    }
                }
                Some(outcome) = self.done_rx.recv() => {
                    report(&outcome, self.ctx.config.json);
                    if self.ctx.config.once {
                        // The run's first connection reports; its other connections are still
                        // sending the same completion to their sender. Let them (bounded), and
                        // let the last QUIC replies reach the sender, before the process exits.
                        let _ = tokio::time::timeout(ONCE_GRACE, async {
                            while connections.join_next().await.is_some() {}
                        })
                        .await;
                        let _ = tokio::time::timeout(Duration::from_secs(2), self.endpoint.wait_idle()).await;
                        return Ok(Some(outcome));
                    }
                }
            }
        }
    }
}

fn bind_tcp(listen: SocketAddr, flow: &FlowConfig) -> Result<TcpListener> {
    let socket = if listen.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }?;
    socket.set_reuseaddr(true)?;
    // Accepted sockets inherit these; set before listen so the window scale accounts for them.
    if let Some(b) = flow.rcvbuf {
        socket.set_recv_buffer_size(b as u32)?;
    }
    if let Some(b) = flow.sndbuf {
        socket.set_send_buffer_size(b as u32)?;
    }
    socket
        .bind(listen)
        .with_context(|| format!("cannot listen on {listen}"))?;
    Ok(socket.listen(1024)?)
}

fn report(o: &RunOutcome, json: bool) {
    if json {
        println!("{}", o.json());
    } else {
        println!("{}", o.line());
    }
}
