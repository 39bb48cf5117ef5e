//! What every rule reads: the observations, the base arm and its median time, the path.

use crate::model::PathFigures;
use crate::obs::{ArmKind, ArmObs, Observations};
use crate::verdict::Bottleneck;

pub struct Ctx<'a> {
    pub obs: &'a Observations,
    pub base: &'a ArmObs,
    /// The base's median time (s).
    pub t: f64,
    pub path: Option<PathFigures>,
}

impl<'a> Ctx<'a> {
    /// The measured arms of these kinds.
    pub fn arms(&self, pred: impl Fn(&ArmKind) -> bool) -> impl Iterator<Item = &'a ArmObs> {
        self.obs
            .arms
            .iter()
            .filter(move |a| a.measured() && pred(&a.kind))
    }
}

/// A named constraint before ranking, with the noise of its share.
pub struct Found {
    pub b: Bottleneck,
    pub noise: f64,
}
