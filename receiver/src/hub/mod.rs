//! Runs that span several connections. The first connection of a run (by run id) creates it:
//! one writer pool, one receive budget, one tally of claimed files for the whole run. Later
//! connections join it. Each connection ends with its own end marker; when the last one has
//! ended, whichever connection ended last finishes the writer and publishes one completion,
//! which every connection sends to its sender. A failed connection cancels the others; a
//! connection that never arrives is given up after the idle timeout.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use futures::future::{BoxFuture, FutureExt, Shared};
use shoal_pipeline::writer::{open_subfolder, BatchSender, WriterDest, WriterOptions, WriterPool};
use shoal_proto::codec::{BlockLedger, Completion, Hello};
use shoal_proto::control::RecvSettings;
use shoal_row::metrics;
use shoal_transport::window_share::{SharedWindow, Side, TunedReceive};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

mod idle;
mod membership;

use crate::claims::Claims;
use crate::config::ReceiverConfig;
use crate::run::{self, TransportFacts};

/// Every run in progress, by run id.
#[derive(Default)]
pub(crate) struct Hub {
    runs: Mutex<HashMap<[u8; 16], Arc<Run>>>,
    /// Folders prepared over the control channel (`recv --control`): a run with one of these
    /// ids writes into its own folder instead of `--dest`.
    prepared: Mutex<HashMap<[u8; 16], PathBuf>>,
    /// The receiver settings a prepared run asked for (`crate::runconfig`): its data
    /// connections run with them, no other run does.
    settings: Mutex<HashMap<[u8; 16], RecvSettings>>,
    /// Run ids whose prepared folder was cleaned up (most recent last, bounded): such a run
    /// is refused rather than written into `--dest` itself.
    forgotten: Mutex<std::collections::VecDeque<[u8; 16]>>,
    /// Run ids of runs that failed (most recent last, bounded): a connection of such a run
    /// that arrives after the failure is refused rather than starting the run anew (it would
    /// hold the destination until the idle timeout). Runs fail midway on their size now that
    /// the limits are enforced on what arrives, often before every connection has arrived.
    failed: Mutex<std::collections::VecDeque<([u8; 16], String)>>,
    /// Prepared run ids a run (data or tar-tcp baseline) has used, with that run's
    /// description: a prepared id takes one run only (a second would mix its files with the
    /// first's in one folder). Bounded as `prepared` is: cleanup removes an id's entry.
    used: Mutex<HashMap<[u8; 16], (String, Instant)>>,
}

/// Most failed run ids [`Hub`] remembers.
const MAX_FAILED: usize = 4096;
/// Longest reason kept per failed run.
const MAX_REASON: usize = 512;

/// Creates `--dest/<run id>` for a run by hand: a new folder, never one an earlier run wrote
/// (a run that overwrote a tree would measure another workload, and could hide a failure
/// behind the earlier run's files).
fn create_run_folder(
    root: &std::path::Path,
    folder: &std::path::Path,
    run_hex: &str,
) -> Result<()> {
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    match std::fs::create_dir(folder) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "the folder of run {run_hex} ({}) exists already: a run id goes into a new folder only; send with another --run-id (or none), or receive with --flat",
            folder.display()
        ),
        Err(e) => Err(e).with_context(|| format!("cannot create {}", folder.display())),
    }
}

/// Most run folders the control channel keeps track of at once.
pub(crate) const MAX_PREPARED: usize = 100_000;

/// One run, shared by its connections.
pub(crate) struct Run {
    pub hello: Hello,
    /// Where it writes: `--dest/<run id>`, its prepared folder, or `--dest` itself (`--flat`).
    pub dest: PathBuf,
    /// Whether `dest` is a folder of its own (not `--dest` itself).
    pub prepared: bool,
    /// Set when the writer failed: connections stop reading at once, and report the
    /// writer's error rather than a failure of their own.
    pub writer_failed: Arc<AtomicBool>,
    pub first_byte: Instant,
    /// This process's CPU seconds at the run's admission (`metrics::cpu_seconds`).
    pub cpu_start: f64,
    pub budget: Arc<Semaphore>,
    /// Time the network side waited to hand bytes to the writers, µs, summed over the run's
    /// connections and streams (the completion report's `write_wait_micros`).
    pub write_wait: AtomicU64,
    pub claims: Mutex<Claims>,
    /// The blocks of the run's files carried as blocks, from all its connections.
    pub blocks: Mutex<BlockLedger>,
    /// Cancelled when the run fails: every connection stops reading.
    pub cancel: CancellationToken,
    /// Writer ids are unique across the run's connections.
    pub next_file_id: AtomicU64,
    /// Records accepted so far (any connection): the run's progress, which the idle watch
    /// (`watch_progress`) checks.
    accepted: AtomicU64,
    /// The QUIC connection receive window, shared by the run's connections.
    pub quic_window: Arc<SharedWindow<Arc<TunedReceive>>>,
    writer: Mutex<Option<WriterPool>>,
    state: Mutex<State>,
    done: watch::Sender<Option<Finished>>,
}

/// A run's end as every connection sees it: the completion, and with `--fsync` the sync that
/// runs after it (µs taken, or why it failed), awaited by each connection after its report.
#[derive(Clone)]
pub(crate) struct Finished {
    pub completion: Completion,
    pub sync: Option<Shared<BoxFuture<'static, Result<u64, String>>>>,
}

impl Finished {
    fn failed(message: &str) -> Self {
        Finished {
            completion: Completion {
                errors: vec![message.into()],
                ..Default::default()
            },
            sync: None,
        }
    }
}

#[derive(Default)]
struct State {
    joined: u16,
    finished: u16,
    seen_index: Vec<bool>,
    /// No more connections may join (the run failed or gave up waiting).
    closed: bool,
    finalizing: bool,
    errors: Vec<String>,
    peak_streams: u64,
    facts: TransportFacts,
}

/// What one connection reports when it is done with its share.
pub(crate) struct ConnEnd {
    pub errors: Vec<String>,
    /// The connection stopped early without an error of its own (the writer failed; its
    /// report carries the cause).
    pub stopped: bool,
    pub peak_streams: u64,
    pub facts: TransportFacts,
}

/// A connection's place in a run: the run and its own handle on the writer.
pub(crate) struct Membership {
    pub run: Arc<Run>,
    pub batches: BatchSender,
}

impl Hub {
    /// Registers a prepared run folder and the run's own settings (empty: the receiver's);
    /// refuses a run id already registered.
    pub(crate) fn prepare(
        &self,
        run_id: [u8; 16],
        dest: PathBuf,
        settings: RecvSettings,
    ) -> Result<()> {
        let mut prepared = self.prepared.lock().expect("prepared lock");
        Self::may_prepare(&prepared, &run_id)?;
        prepared.insert(run_id, dest);
        if !settings.is_empty() {
            self.settings
                .lock()
                .expect("settings lock")
                .insert(run_id, settings);
        }
        Ok(())
    }

    /// Refuses a run id that is prepared already, or one past the cap: checked before a
    /// prepare creates anything, and again when it registers.
    pub(crate) fn check_prepare(&self, run_id: &[u8; 16]) -> Result<()> {
        Self::may_prepare(&self.prepared.lock().expect("prepared lock"), run_id)
    }

    fn may_prepare(prepared: &HashMap<[u8; 16], PathBuf>, run_id: &[u8; 16]) -> Result<()> {
        if prepared.len() >= MAX_PREPARED {
            bail!("{MAX_PREPARED} run folders are prepared already; clean some up first");
        }
        if prepared.contains_key(run_id) {
            bail!("run {} is prepared already", hex::encode(run_id));
        }
        Ok(())
    }

    /// Refuses a prepared run id that a run (data or tar-tcp baseline) has used already.
    fn refuse_reuse(&self, run_id: &[u8; 16]) -> Result<()> {
        if let Some((first, at)) = self.used.lock().expect("used lock").get(run_id) {
            bail!(
                "run {} was prepared for one run, and {first} ({:.1} s ago) used it already; a second run would mix its files with the first's: prepare a new run id",
                hex::encode(run_id),
                at.elapsed().as_secs_f64()
            );
        }
        Ok(())
    }

    /// Takes prepared run id `run_id` for the tar-tcp baseline: refused if a run used it.
    pub(crate) fn use_for_baseline(&self, run_id: &[u8; 16]) -> Result<()> {
        self.refuse_reuse(run_id)?;
        self.used.lock().expect("used lock").insert(
            *run_id,
            ("the tar-tcp baseline that began".into(), Instant::now()),
        );
        Ok(())
    }

    /// The settings run `run_id` was prepared with, if it asked for any.
    pub(crate) fn settings_of(&self, run_id: &[u8; 16]) -> Option<RecvSettings> {
        self.settings
            .lock()
            .expect("settings lock")
            .get(run_id)
            .copied()
    }

    pub(crate) fn prepared_dest(&self, run_id: &[u8; 16]) -> Option<PathBuf> {
        self.prepared
            .lock()
            .expect("prepared lock")
            .get(run_id)
            .cloned()
    }

    /// The folder run `run_id` writes into (or wrote into): its prepared folder, `--dest`
    /// itself with `--flat`, else `--dest/<run id>`.
    pub(crate) fn folder_of(&self, config: &ReceiverConfig, run_id: &[u8; 16]) -> PathBuf {
        match self.prepared_dest(run_id) {
            Some(folder) => folder,
            None if config.flat => config.dest.clone(),
            None => config.dest.join(hex::encode(run_id)),
        }
    }

    pub(crate) fn in_progress(&self, run_id: &[u8; 16]) -> bool {
        self.runs.lock().expect("hub lock").contains_key(run_id)
    }

    /// Forgets a prepared folder, unless a run is writing into it right now. A later run
    /// with that id is refused (it must not land in `--dest` itself).
    pub(crate) fn forget(&self, run_id: &[u8; 16]) -> Result<PathBuf> {
        let runs = self.runs.lock().expect("hub lock");
        if runs.contains_key(run_id) {
            bail!("run {} is still in progress", hex::encode(run_id));
        }
        let folder = self
            .prepared
            .lock()
            .expect("prepared lock")
            .remove(run_id)
            .ok_or_else(|| anyhow::anyhow!("run {} was not prepared here", hex::encode(run_id)))?;
        self.settings.lock().expect("settings lock").remove(run_id);
        self.used.lock().expect("used lock").remove(run_id);
        let mut forgotten = self.forgotten.lock().expect("forgotten lock");
        if forgotten.len() >= MAX_PREPARED {
            forgotten.pop_front();
        }
        forgotten.push_back(*run_id);
        Ok(folder)
    }

    fn was_forgotten(&self, run_id: &[u8; 16]) -> bool {
        self.forgotten
            .lock()
            .expect("forgotten lock")
            .contains(run_id)
    }

    /// Creates the run of `hello`, or joins it; refuses a hello that does not match the run.
    /// `ready`: when the connection could first carry the run's bytes (its handshake's end),
    /// the receiver's clock start for a run this connection creates.
    pub(crate) fn join(
        &self,
        config: &ReceiverConfig,
        hello: &Hello,
        ready: Instant,
    ) -> Result<Membership> {
        let mut runs = self.runs.lock().expect("hub lock");
        let run = match runs.get(&hello.run_id) {
            Some(run) => {
                let first = &run.hello;
                if (
                    first.mode,
                    first.file_count,
                    first.total_bytes,
                    first.conn_count,
                ) != (
                    hello.mode,
                    hello.file_count,
                    hello.total_bytes,
                    hello.conn_count,
                ) {
                    bail!(
                        "connection {} does not match its run's first hello",
                        hello.conn_index
                    );
                }
                run.clone()
            }
            None => {
                let run_hex = hex::encode(hello.run_id);
                let failed = self.failed.lock().expect("failed lock");
                if let Some((_, why)) = failed.iter().find(|(id, _)| *id == hello.run_id) {
                    bail!(
                        "run {run_hex} failed before its connection {} arrived: {why}",
                        hello.conn_index
                    );
                }
                drop(failed);
                let prepared = self.prepared_dest(&hello.run_id);
                if prepared.is_none() && self.was_forgotten(&hello.run_id) {
                    bail!("run {run_hex}'s folder was cleaned up; refusing to write that run into the destination itself");
                }
                // A folder of its own: prepared over the control channel, or (unless
                // `--flat`) `--dest/<run id>`, created here for this run and no other.
                let own = || WriterDest::Prepared {
                    parent: config.dest.clone(),
                    name: run_hex.clone(),
                };
                let (dest, writer_dest, create) = match prepared {
                    Some(folder) => {
                        self.refuse_reuse(&hello.run_id)?;
                        // The prepared folder must still be there, and a folder: never a
                        // symbolic link swapped in, never recreated.
                        open_subfolder(&config.dest, &run_hex)
                            .with_context(|| format!("run {run_hex}'s prepared folder"))?;
                        (folder, own(), false)
                    }
                    None if config.flat => (
                        config.dest.clone(),
                        WriterDest::Root(config.dest.clone()),
                        false,
                    ),
                    None => (config.dest.join(&run_hex), own(), true),
                };
                let is_prepared = matches!(writer_dest, WriterDest::Prepared { .. });
                // Two runs writing into one destination at once could leave a tree that is
                // neither's (each reporting ok): the later one is refused up front. A run into
                // `--dest` overlaps every run (prepared folders are inside it); runs into
                // different prepared folders do not overlap.
                if let Some(other) = runs
                    .values()
                    .find(|r| r.dest == dest || !is_prepared || !r.prepared)
                {
                    bail!(
                        "destination {} is being written by run {} (from its first connection {:.1} s ago); a second run into it at the same time could mix the two runs' files, so run {} is refused: wait for the other to end, or use another destination",
                        other.dest.display(),
                        &hex::encode(other.hello.run_id)[..8],
                        other.first_byte.elapsed().as_secs_f64(),
                        &run_hex[..8]
                    );
                }
                if create {
                    create_run_folder(&config.dest, &dest, &run_hex)?;
                }
                metrics::reset_peak_rss();
                let cancel = CancellationToken::new();
                let writer_failed = Arc::new(AtomicBool::new(false));
                let on_fail = {
                    let (cancel, failed) = (cancel.clone(), writer_failed.clone());
                    Box::new(move || {
                        failed.store(true, Ordering::SeqCst);
                        cancel.cancel();
                    })
                };
                let writer = WriterPool::spawn(WriterOptions {
                    dest: writer_dest,
                    fsync: config.fsync,
                    tag: run_hex,
                    on_fail: Some(on_fail),
                    writers: config.writers,
                })?;
                let run = Arc::new(Run {
                    hello: hello.clone(),
                    dest,
                    prepared: is_prepared,
                    writer_failed,
                    first_byte: ready,
                    cpu_start: metrics::cpu_seconds(),
                    budget: Arc::new(Semaphore::new(config.write_budget)),
                    write_wait: AtomicU64::new(0),
                    claims: Mutex::new(Claims::for_run(
                        hello,
                        config.max_files,
                        config.max_bytes,
                        config.max_folders,
                    )),
                    blocks: Mutex::new(BlockLedger::default()),
                    cancel,
                    next_file_id: AtomicU64::new(0),
                    accepted: AtomicU64::new(0),
                    quic_window: SharedWindow::new(
                        config.flow.conn_window,
                        hello.conn_count,
                        Side::Receive,
                    ),
                    writer: Mutex::new(Some(writer)),
                    state: Mutex::new(State {
                        seen_index: vec![false; hello.conn_count as usize],
                        ..Default::default()
                    }),
                    done: watch::channel(None).0,
                });
                if is_prepared && !create {
                    self.used.lock().expect("used lock").insert(
                        hello.run_id,
                        (
                            format!(
                                "the {} run of {} connection(s) that began",
                                hello.mode.name(),
                                hello.conn_count
                            ),
                            Instant::now(),
                        ),
                    );
                }
                runs.insert(hello.run_id, run.clone());
                tokio::spawn(idle::watch_progress(
                    Arc::downgrade(&run),
                    config.idle_timeout,
                ));
                run
            }
        };
        let mut st = run.state.lock().expect("run lock");
        if st.closed {
            match st.errors.first() {
                Some(why) => bail!("the run has already failed: {why}"),
                None => bail!("the run has already ended or failed"),
            }
        }
        let index = hello.conn_index as usize;
        if st.seen_index[index] {
            bail!("connection index {index} joined the run twice");
        }
        st.seen_index[index] = true;
        st.joined += 1;
        let batches = run
            .writer
            .lock()
            .expect("writer lock")
            .as_ref()
            .expect("a joinable run has its writer")
            .batches
            .clone();
        drop(st);
        Ok(Membership { run, batches })
    }

    /// Forgets a run that ended; remembers why if it failed (`errors`).
    fn remove(&self, run_id: &[u8; 16], errors: &[String]) {
        let mut runs = self.runs.lock().expect("hub lock");
        if !errors.is_empty() {
            let mut ids = self.failed.lock().expect("failed lock");
            if ids.len() >= MAX_FAILED {
                ids.pop_front();
            }
            // Bounded: a few hundred bytes of the reason is enough to name it.
            let mut why = errors.join("; ");
            if why.len() > MAX_REASON {
                let mut cut = MAX_REASON;
                while !why.is_char_boundary(cut) {
                    cut -= 1;
                }
                why.truncate(cut);
                why.push('…');
            }
            ids.push_back((*run_id, why));
        }
        runs.remove(run_id);
    }
}

impl Run {
    /// Counts progress: records were accepted (`idle::watch_progress`).
    pub(crate) fn progressed(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the writer failed (its report carries the cause).
    pub(crate) fn writer_failed(&self) -> bool {
        self.writer_failed.load(Ordering::SeqCst)
    }

    /// Whether the caller is the one to finish the run now (at most one caller ever is).
    fn take_finalize(&self, st: &mut State) -> bool {
        let all_in = st.joined == self.hello.conn_count || st.closed;
        if all_in && st.finished == st.joined && !st.finalizing {
            st.finalizing = true;
            st.closed = true;
            return true;
        }
        false
    }

    async fn finalize(self: &Arc<Self>, hub: &Hub) -> Finished {
        let writer = self.writer.lock().expect("writer lock").take();
        let mut report = match writer {
            Some(w) => w.finish().await,
            None => return Finished::failed("the run's writer was finished twice"),
        };
        let sync = report.sync.take().map(|pending| {
            async move { pending.wait().await.map(|d| d.as_micros() as u64) }
                .boxed()
                .shared()
        });
        let (mut errors, peak, joined, facts) = {
            let st = self.state.lock().expect("run lock");
            (
                st.errors.clone(),
                st.peak_streams,
                st.joined,
                st.facts.clone(),
            )
        };
        if errors.is_empty() {
            // Every connection ended cleanly, yet a file's blocks do not cover it: name it
            // (the writer removed its temporary; no final name was ever written).
            let missing = self.blocks.lock().expect("blocks").incomplete();
            errors.extend(missing.iter().take(4).map(ToString::to_string));
            if missing.len() > 4 {
                errors.push(format!("{} more file(s) missing blocks", missing.len() - 4));
            }
        }
        let claimed = {
            let c = self.claims.lock().expect("claims");
            (c.files, c.bytes)
        };
        let mut completion = run::completion(
            &self.hello,
            claimed,
            &report,
            errors,
            self.first_byte,
            &facts,
        );
        completion.peak_streams = peak;
        completion.connections = u64::from(joined);
        completion.sync_follows = sync.is_some();
        // The whole process's CPU since admission: runs served at the same time share it.
        completion.cpu_micros =
            Some(((metrics::cpu_seconds() - self.cpu_start).max(0.0) * 1e6) as u64);
        completion.threads = Some(metrics::runtime_threads());
        completion.write_wait_micros = Some(self.write_wait.load(Ordering::Relaxed));
        // Only a run of several connections can have one arrive after its end; a run of one
        // is forgotten, so the same run id may be sent again (`send --run-id` with `--flat`).
        let failed: &[String] = match self.hello.conn_count {
            1 => &[],
            _ => &completion.errors,
        };
        hub.remove(&self.hello.run_id, failed);
        let finished = Finished { completion, sync };
        self.done.send_replace(Some(finished.clone()));
        finished
    }
}

/// Keeps the largest figures any connection reported.
fn merge_facts(into: &mut TransportFacts, from: TransportFacts) {
    into.stream_window = into.stream_window.max(from.stream_window);
    into.conn_window = into.conn_window.max(from.conn_window);
    into.conn_window_min = match (into.conn_window_min, from.conn_window_min) {
        (0, b) => b,
        (a, 0) => a,
        (a, b) => a.min(b),
    };
    into.rcvbuf = into.rcvbuf.max(from.rcvbuf_now());
    into.udp_offload = into.udp_offload.or(from.udp_offload);
}

#[cfg(test)]
mod tests;
