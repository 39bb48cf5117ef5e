//! The `loss` axis (`loss = ["0%", "0.01%", "1%"]`): the emulated link's random loss per wire
//! packet and direction, set on the running link before each run (shoal-sweep's conditions).

use anyhow::{bail, Result};

use crate::axis::{self, AxisValue};

/// The loss a configuration's `loss` axis asks for (`None` without the axis), as a
/// probability; written as a percentage (`"1%"`, `"0.01%"`, `"0"`).
pub fn of(params: &[(String, AxisValue)]) -> Result<Option<f64>> {
    let Some((_, v)) = params.iter().find(|(k, _)| k == axis::LOSS) else {
        return Ok(None);
    };
    match shoal_link::parse::parse_loss(&v.text()) {
        Ok(p) => Ok(Some(p)),
        Err(e) => bail!("axis {}: {e:#}", axis::LOSS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_values() {
        let p = |s: &str| of(&[(axis::LOSS.to_string(), AxisValue::Str(s.into()))]);
        assert_eq!(p("1%").unwrap(), Some(0.01));
        assert_eq!(p("0").unwrap(), Some(0.0));
        let e = p("1").unwrap_err().to_string();
        assert!(
            e.starts_with("axis loss:") && e.contains("percentage"),
            "{e}"
        );
        assert_eq!(of(&[]).unwrap(), None);
    }
}
