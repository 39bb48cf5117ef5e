//! The `loss` axis (`loss = ["0%", "0.01%", "1%"]`): the emulated link's random loss per wire
//! packet and direction, changed on the running link before each run (the forwarder takes it
//! and confirms it, `shoal_link::set_loss`) so runs of every loss rate stay in one shuffled
//! order. The row's `link_loss_percent` is the rate the forwarder confirmed. The link check before
//! the first run measures `[link] loss` only.

use anyhow::Result;

use shoal_report::columns::{col, Row};

/// Sets link `name`'s loss to `p` for the next run and puts what the forwarder confirmed in
/// `row`.
pub fn apply(name: &str, p: f64, row: &mut Row) -> Result<()> {
    let got = shoal_link::set_loss(name, p)?;
    row.set(
        col::LINK_LOSS_PERCENT,
        shoal_report::legacy::loss_percent(got.loss()),
    );
    Ok(())
}
