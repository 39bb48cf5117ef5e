//! Where one connection's sending loop waited, so a run's row can say what held it back:
//! for the reader (the source side: reading files, or CPU), or for a per-file stream slot
//! (the run's outstanding-stream limit, or the receiver's stream credit). Waiting on the
//! socket itself is the network's part and shows in the transport statistics instead.

use std::time::Duration;

/// Time the sending loop spent waiting, per cause.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Waits {
    /// For the reader's next chunk while the connection could have taken more.
    pub read: Duration,
    /// For a stream slot: the outstanding limit was reached, or opening a stream waited for
    /// the receiver's credit. Always zero in bundle modes.
    pub stream: Duration,
}

impl Waits {
    /// Sums the waits of a run's connections.
    pub fn total(all: impl IntoIterator<Item = Waits>) -> Waits {
        all.into_iter().fold(Waits::default(), |a, w| Waits {
            read: a.read + w.read,
            stream: a.stream + w.stream,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_sum_each_cause() {
        let ms = Duration::from_millis;
        let t = Waits::total([
            Waits {
                read: ms(5),
                stream: ms(0),
            },
            Waits {
                read: ms(1),
                stream: ms(7),
            },
        ]);
        assert_eq!(
            t,
            Waits {
                read: ms(6),
                stream: ms(7)
            }
        );
    }
}
