//! Typed quantities of the matrix file, parsed once when the file is read: link rates, times,
//! queues and loss (with the link's own parsers, so a matrix means what `shoal link up` would),
//! payload sizes and run time limits (with `shoal_proto::units`, as the CLI flags). Each keeps
//! the text it was written as, for meta.json.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use shoal_link::parse::QueueSpec;

/// A kind of quantity: how its text is parsed.
pub trait Unit {
    type Value;
    /// An example for messages: `"141ms"`.
    const EXAMPLE: &'static str;
    fn parse(text: &str) -> Result<Self::Value, String>;
}

/// Declares a kind of quantity: its value type, an example, and its parser.
macro_rules! unit {
    ($(#[$doc:meta])* $name:ident: $value:ty, $example:literal, $parse:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum $name {}

        impl Unit for $name {
            type Value = $value;
            const EXAMPLE: &'static str = $example;
            fn parse(text: &str) -> Result<$value, String> {
                $parse(text)
            }
        }
    };
}

/// A `shoal_proto::units` parser's error as text (it names the value).
fn units<T>(
    parse: fn(&str) -> Result<T, shoal_proto::units::UnitError>,
) -> impl Fn(&str) -> Result<T, String> {
    move |text| parse(text).map_err(|e| e.to_string())
}

/// A `shoal link` parser's error as text (it names the value).
fn link<T>(parse: fn(&str) -> anyhow::Result<T>) -> impl Fn(&str) -> Result<T, String> {
    move |text| parse(text).map_err(|e| format!("{e:#}"))
}

unit!(
    /// A link's round-trip time (`shoal link` bounds: up to an hour).
    LinkTime: Duration, "141ms", link(shoal_link::parse::parse_span)
);
unit!(
    /// A link rate in bits per second (`300mbit`).
    LinkRate: u64, "300mbit", units(shoal_proto::units::parse_rate)
);
unit!(
    /// A link's queue: a multiple of the BDP or bytes (`1bdp`, `4MiB`).
    LinkQueue: QueueSpec, "1bdp", link(shoal_link::parse::parse_queue)
);
unit!(
    /// A link's random loss as a fraction (`0.1%`).
    LinkLoss: f64, "0.1%", link(shoal_link::parse::parse_loss)
);
unit!(
    /// A run's time limit (`15m`, `90s`), as the CLI's `--timeout`.
    TimeLimit: Duration, "15m", units(shoal_proto::units::parse_duration)
);

/// A parsed quantity and the text it was written as (serialised as that text).
#[derive(Clone, Debug, PartialEq)]
pub struct Spelled<U: Unit> {
    pub text: String,
    pub value: U::Value,
    unit: PhantomData<U>,
}

impl<U: Unit> Spelled<U> {
    /// `text` parsed as `U`.
    pub fn parse(text: &str) -> Result<Spelled<U>, String> {
        Ok(Spelled {
            text: text.to_string(),
            value: U::parse(text)?,
            unit: PhantomData,
        })
    }

    /// A value that was not written (a default), spelled as `text`.
    pub fn implied(value: U::Value, text: String) -> Spelled<U> {
        Spelled {
            text,
            value,
            unit: PhantomData,
        }
    }
}

impl<U: Unit> Serialize for Spelled<U> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de, U: Unit> Deserialize<'de> for Spelled<U> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<U>(PhantomData<U>);
        impl<U: Unit> Visitor<'_> for V<U> {
            type Value = Spelled<U>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a string such as \"{}\"", U::EXAMPLE)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Spelled<U>, E> {
                Spelled::parse(s).map_err(E::custom)
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// A byte count: a number, or a size like `"4KiB"` (`shoal_proto::units::parse_size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number of bytes or a size like \"4KiB\"")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Size, E> {
                u64::try_from(n)
                    .map(Size)
                    .map_err(|_| E::custom(format!("{n} bytes: a size cannot be negative")))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Size, E> {
                Ok(Size(n))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Size, E> {
                shoal_proto::units::parse_size(s)
                    .map(Size)
                    .map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Which emulator brings the link up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Tun,
    Netem,
    Auto,
}

impl From<Backend> for shoal_link::BackendChoice {
    fn from(b: Backend) -> Self {
        match b {
            Backend::Tun => shoal_link::BackendChoice::Tun,
            Backend::Netem => shoal_link::BackendChoice::Netem,
            Backend::Auto => shoal_link::BackendChoice::Auto,
        }
    }
}

impl From<shoal_link::BackendChoice> for Backend {
    fn from(b: shoal_link::BackendChoice) -> Self {
        match b {
            shoal_link::BackendChoice::Tun => Backend::Tun,
            shoal_link::BackendChoice::Netem => Backend::Netem,
            shoal_link::BackendChoice::Auto => Backend::Auto,
        }
    }
}
