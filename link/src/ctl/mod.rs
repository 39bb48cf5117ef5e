//! The link's controller, run by `shoal link …` and the sweep: bringing a link up and down
//! (`up`), reading its state (`status`), an outage (`blackhole`) and a loss change while it
//! runs (`loss`). It talks to the forwarder daemon only through `crate::ipc`.

pub mod blackhole;
pub mod loss;
pub mod status;
pub mod up;
