//! Progress: a live line (runs done / total, current configuration and its elapsed time, ETA)
//! on a terminal, redrawn every second; plain lines otherwise. Goes to stderr; results go to
//! stdout and files.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use shoal_matrix::plan::fmt_duration;

struct State {
    total: usize,
    done: usize,
    /// Runs recorded before this process started (`--continue`): not in the ETA's rate.
    before: usize,
    ok: usize,
    started: Instant,
    current: String,
    current_since: Instant,
    last_finish: Instant,
}

impl State {
    fn eta(&self) -> String {
        let here = self.done - self.before;
        if here == 0 {
            return "?".into();
        }
        // Mean time per finished run (waits and verification included), minus what the
        // current run has already used.
        let per = self.last_finish.duration_since(self.started).as_secs_f64() / here as f64;
        let left = per * (self.total - self.done) as f64
            - if self.current.is_empty() {
                0.0
            } else {
                self.current_since.elapsed().as_secs_f64().min(per)
            };
        fmt_duration(Duration::from_secs_f64(left.max(0.0)))
    }

    fn line(&self) -> String {
        let mut line = format!(
            "[{}/{} done, {} ok, ETA {}]",
            self.done,
            self.total,
            self.ok,
            self.eta()
        );
        if !self.current.is_empty() {
            line.push_str(&format!(
                " {} ({})",
                self.current,
                fmt_duration(self.current_since.elapsed())
            ));
        }
        let width = terminal_width();
        if line.chars().count() > width.saturating_sub(1) {
            line = line
                .chars()
                .take(width.saturating_sub(2))
                .collect::<String>()
                + "…";
        }
        line
    }

    fn render(&self) {
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[2K{}", self.line());
        let _ = e.flush();
    }
}

pub struct Progress {
    state: Arc<Mutex<State>>,
    tty: bool,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let state = Arc::new(Mutex::new(State {
            total,
            done: 0,
            before: 0,
            ok: 0,
            started: Instant::now(),
            current: String::new(),
            current_since: Instant::now(),
            last_finish: Instant::now(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = tty.then(|| {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1000));
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(s) = state.lock() {
                        s.render();
                    }
                }
            })
        });
        Progress {
            state,
            tty,
            stop,
            ticker,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `done` runs (`ok` of them ok) were recorded before (a continued sweep).
    pub fn recorded_before(&mut self, done: usize, ok: usize) {
        let mut s = self.lock();
        s.done = done;
        s.before = done;
        s.ok = ok;
    }

    /// A run is starting.
    pub fn start(&mut self, order: usize, what: &str) {
        let mut s = self.lock();
        s.current = format!("run {order}: {what}");
        s.current_since = Instant::now();
        if self.tty {
            s.render();
        } else {
            eprintln!("run {order}/{} starting: {what} (ETA {})", s.total, s.eta());
        }
    }

    /// Prints a line above the live line (waits, notes).
    pub fn note(&self, msg: &str) {
        let s = self.lock();
        if self.tty {
            eprint!("\r\x1b[2K{msg}\n");
            s.render();
        } else {
            eprintln!("{msg}");
        }
    }

    /// A run finished with this one-line result.
    pub fn finish(&mut self, ok: bool, result: &str) {
        let mut s = self.lock();
        s.done += 1;
        s.last_finish = Instant::now();
        if ok {
            s.ok += 1;
        }
        let msg = format!("[{}/{}] {result}", s.done, s.total);
        if self.tty {
            s.current.clear();
            eprint!("\r\x1b[2K{msg}\n");
            s.render();
        } else {
            eprintln!("{msg}");
        }
    }

    pub fn close(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        if self.tty {
            eprint!("\r\x1b[2K");
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn terminal_width() -> usize {
    match rustix::termios::tcgetwinsize(std::io::stderr()) {
        Ok(ws) if ws.ws_col > 20 => ws.ws_col as usize,
        _ => 100,
    }
}
