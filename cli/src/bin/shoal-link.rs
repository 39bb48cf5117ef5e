//! Stand-alone `shoal-link link …`, shaped like `shoal link …` so the forwarder re-exec
//! (`EXE link forward …`) works the same.

use clap::Parser;

#[allow(dead_code)] // The `shoal` binary's defaults; this one uses the link's only.
#[path = "../defaults.rs"]
mod defaults;
#[path = "../link.rs"]
mod link;

#[derive(Parser)]
#[command(
    name = "shoal-link",
    about = "Emulated long link between two network namespaces"
)]
enum Top {
    /// Emulated link commands (same as `shoal link`).
    Link {
        #[command(subcommand)]
        cmd: link::LinkCommand,
    },
}

fn main() {
    let Top::Link { cmd } = Top::parse();
    match link::run(cmd) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
