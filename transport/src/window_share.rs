//! A QUIC window (receive or send) shared by the connections of one run.
//!
//! Windows are sized for the path, not per connection: N connections together get what one
//! would (8 × 20 MiB buffered ~200 MB at each end in the study's first pass). An equal split is
//! right while every connection carries data, but one connection often ends up carrying the
//! rest alone — a single large file always does — and with a fixed ⌈1/N⌉ share it was held to
//! a window of 2.5 MiB (≤ 18.6 MB/s at 141 ms). So a connection that has nothing more to carry
//! gives its share back and the connections still carrying data split the window again; the
//! sum of the shares in use never exceeds the window (nor N × the 2 MiB floor of a share).

use std::sync::{Arc, Mutex};

use crate::transport::quic_window_per_connection;

/// Which of a connection's windows is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The receiver's connection receive window.
    Receive,
    /// The sender's send window (unacknowledged bytes in flight).
    Send,
}

/// Who takes the shares: a QUIC connection, or (in tests) a recorder.
pub trait WindowHolder: Send + 'static {
    fn set_window(&self, side: Side, bytes: u64);
}

impl WindowHolder for quinn::Connection {
    fn set_window(&self, side: Side, bytes: u64) {
        match side {
            Side::Receive => {
                if let Ok(v) = quinn::VarInt::from_u64(bytes) {
                    self.set_receive_window(v);
                }
            }
            Side::Send => self.set_send_window(bytes),
        }
    }
}

/// A QUIC connection whose receive window is the smaller of its share of the run's window
/// and what its tuning asks for (`shoal_resume::receive_window`), less what the connection's
/// application has read and not yet written ([`TunedReceive::set_demand`]'s `held`).
pub struct TunedReceive {
    conn: quinn::Connection,
    state: Mutex<Tuned>,
}

struct Tuned {
    /// The connection's share of the run's window (0 until seated).
    share: u64,
    /// The tuning's window, `None` until it sets one (`recv --fixed-window`: never).
    demand: Option<u64>,
    /// Bytes read from the connection and not yet written (the tuning's last count).
    held: u64,
    /// The window in effect, and the smallest one it had.
    current: u64,
    lowest: u64,
}

impl TunedReceive {
    pub fn new(conn: quinn::Connection) -> Arc<Self> {
        Arc::new(Self {
            conn,
            state: Mutex::new(Tuned {
                share: 0,
                demand: None,
                held: 0,
                current: 0,
                lowest: u64::MAX,
            }),
        })
    }

    /// The tuning's window (until it is set, the whole share), and `held`: bytes the
    /// application has read from this connection and not yet written. Those count against
    /// the window, so what the receiver holds for the connection (quinn's unread bytes and
    /// the writers' queue together) stays near the window when the writers fall behind
    /// instead of growing by the whole write budget; the window never falls below
    /// `shoal_resume::receive_window::FLOOR` for it (nor above the share).
    pub fn set_demand(&self, demand: u64, held: u64) {
        let mut st = self.state.lock().expect("tuned window");
        st.demand = Some(demand);
        st.held = held;
        self.apply(&mut st);
    }

    /// The receive window in effect (0 until the connection is seated).
    pub fn current(&self) -> u64 {
        self.state.lock().expect("tuned window").current
    }

    /// The smallest receive window this connection had (its share if never tuned down).
    pub fn lowest(&self) -> u64 {
        let st = self.state.lock().expect("tuned window");
        if st.lowest == u64::MAX {
            st.share
        } else {
            st.lowest
        }
    }

    fn apply(&self, st: &mut Tuned) {
        if st.share == 0 {
            return;
        }
        let window = less_held(st.demand.map_or(st.share, |d| d.min(st.share)), st.held);
        if window != st.current {
            self.conn.set_window(Side::Receive, window);
            st.current = window;
            st.lowest = st.lowest.min(window);
        }
    }
}

impl WindowHolder for Arc<TunedReceive> {
    fn set_window(&self, _: Side, bytes: u64) {
        let mut st = self.state.lock().expect("tuned window");
        st.share = bytes;
        self.apply(&mut st);
    }
}

/// A window less the bytes held past it, at least the receive window's floor (or the window
/// itself, when that is smaller).
fn less_held(window: u64, held: u64) -> u64 {
    window
        .saturating_sub(held)
        .max(shoal_resume::receive_window::FLOOR.min(window))
}

/// One run's window, split over the connections still carrying data.
pub struct SharedWindow<H: WindowHolder = quinn::Connection> {
    total: u64,
    side: Side,
    state: Mutex<State<H>>,
}

struct State<H> {
    /// Connections the run announced.
    expected: u16,
    /// Connections that have nothing more to carry.
    finished: u16,
    /// Seated connections still carrying data.
    seats: Vec<Option<H>>,
}

impl<H: WindowHolder> SharedWindow<H> {
    /// `total` shared by the `connections` a run announced. Until a connection has finished,
    /// its share is kept for it, seated yet or not.
    pub fn new(total: u64, connections: u16, side: Side) -> Arc<Self> {
        Arc::new(Self {
            total,
            side,
            state: Mutex::new(State {
                expected: connections.max(1),
                finished: 0,
                seats: Vec::new(),
            }),
        })
    }

    /// What each connection still carrying data gets now.
    pub fn share(&self) -> u64 {
        self.share_of(&self.state.lock().expect("window share"))
    }

    fn share_of(&self, st: &State<H>) -> u64 {
        let carrying = st.expected.saturating_sub(st.finished).max(1);
        quic_window_per_connection(self.total, carrying)
    }

    /// Seats a connection: it gets the current share at once.
    pub fn seat(self: &Arc<Self>, holder: H) -> Seat<H> {
        let mut st = self.state.lock().expect("window share");
        let share = self.share_of(&st);
        holder.set_window(self.side, share);
        st.seats.push(Some(holder));
        Seat {
            window: self.clone(),
            index: st.seats.len() - 1,
            initial: share,
            finished: false,
        }
    }
}

/// A connection's place in a [`SharedWindow`]; finishing (or dropping) it hands the share on.
pub struct Seat<H: WindowHolder = quinn::Connection> {
    window: Arc<SharedWindow<H>>,
    index: usize,
    initial: u64,
    finished: bool,
}

impl<H: WindowHolder> Seat<H> {
    /// The share this connection was seated with.
    pub fn initial(&self) -> u64 {
        self.initial
    }

    /// This connection has nothing more to carry: the others split the window again.
    pub fn finished(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let w = &self.window;
        let mut st = w.state.lock().expect("window share");
        st.seats[self.index] = None;
        let before = w.share_of(&st);
        st.finished = st.finished.saturating_add(1);
        // Shares only grow, and each change reaches every seated connection, so each of them
        // has `before` now.
        let share = w.share_of(&st);
        if share > before {
            for holder in st.seats.iter().flatten() {
                holder.set_window(w.side, share);
            }
        }
    }
}

impl<H: WindowHolder> Drop for Seat<H> {
    fn drop(&mut self) {
        self.finished();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records every window it is given.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<u64>>>);

    impl WindowHolder for Recorder {
        fn set_window(&self, _: Side, bytes: u64) {
            self.0.lock().unwrap().push(bytes);
        }
    }

    impl Recorder {
        fn last(&self) -> u64 {
            *self.0.lock().unwrap().last().unwrap()
        }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn bytes_read_and_not_yet_written_count_against_the_window() {
        let mib = 1 << 20;
        // A full 4 MiB write budget behind the study's 20 MiB share: quinn may hold 16 MiB.
        assert_eq!(less_held(20 * mib, 4 * mib), 16 * mib);
        // Writers keeping up hold nothing: the window is whole.
        assert_eq!(less_held(20 * mib, 0), 20 * mib);
        // Never below the floor, and a window under the floor is not raised to it.
        assert_eq!(less_held(3 * mib, 4 * mib), 2 * mib);
        assert_eq!(less_held(mib, 4 * mib), mib);
    }

    #[test]
    fn one_connection_gets_the_whole_window() {
        let w = SharedWindow::new(20 * MIB, 1, Side::Receive);
        let r = Recorder::default();
        let seat = w.seat(r.clone());
        assert_eq!(seat.initial(), 20 * MIB);
        assert_eq!(r.last(), 20 * MIB);
    }

    #[test]
    fn shares_are_split_then_handed_on_as_connections_finish() {
        let w = SharedWindow::new(20 * MIB, 4, Side::Send);
        let rs: Vec<Recorder> = (0..4).map(|_| Recorder::default()).collect();
        let mut seats: Vec<_> = rs.iter().map(|r| w.seat(r.clone())).collect();
        for r in &rs {
            assert_eq!(r.last(), 5 * MIB);
        }
        seats[0].finished();
        // Three still carrying: a third each, and the finished one is left alone.
        assert_eq!(rs[1].last(), 20 * MIB / 3);
        assert_eq!(rs[0].0.lock().unwrap().len(), 1);
        // Finishing twice counts once.
        seats[0].finished();
        assert_eq!(w.share(), 20 * MIB / 3);
        drop(seats.remove(1));
        drop(seats.remove(1));
        // The last one carrying data has the whole window; the sum never exceeded it.
        assert_eq!(rs[3].last(), 20 * MIB);
        // seats: the finished first one, and the last one.
        assert_eq!(seats[1].initial(), 5 * MIB);
        // The first one, finished at once, was never given more than its first share.
        assert_eq!(*rs[0].0.lock().unwrap(), [5 * MIB]);
    }

    #[test]
    fn a_connection_not_yet_seated_keeps_its_share() {
        // The run announced 8; one finished before the others were seated.
        let w = SharedWindow::new(16 * MIB, 8, Side::Receive);
        let early = Recorder::default();
        let mut s = w.seat(early.clone());
        assert_eq!(early.last(), 2 * MIB);
        s.finished();
        let late = Recorder::default();
        let l = w.seat(late.clone());
        assert_eq!(l.initial(), 16 * MIB / 7);
    }

    #[test]
    fn never_below_the_smallest_share() {
        let w = SharedWindow::new(20 * MIB, 64, Side::Receive);
        let r = Recorder::default();
        let _s = w.seat(r.clone());
        assert_eq!(r.last(), 2 * MIB);
    }
}
