//! Stand-alone `shoal-link link …`, shaped like `shoal link …` so the forwarder re-exec
//! (`EXE link forward …`) works the same.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "shoal-link",
    about = "Emulated long link between two network namespaces"
)]
enum Top {
    /// Emulated link commands (same as `shoal link`).
    Link {
        #[command(subcommand)]
        cmd: shoal_link::cli::LinkCommand,
    },
}

fn main() {
    let Top::Link { cmd } = Top::parse();
    match shoal_link::cli::run(cmd) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
