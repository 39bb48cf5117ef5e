//! `shoal sweep` and the study page: matrices run end to end, and the committed page and charts
//! regenerated from the committed results.

#[path = "../support/mod.rs"]
mod support;

mod check;
mod continued;
mod html;
mod killed;
mod pandas_example;
mod study_page;
mod sweep;
