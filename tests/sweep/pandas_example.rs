//! docs/sweep.md's pandas example ("Loading runs.csv in pandas") runs as written against the
//! committed sample and draws its chart. Skipped, saying so, where pandas or matplotlib is not
//! installed (scripts/setup.sh installs both).

use std::process::Command;

use crate::support::workspace_root;

/// The ```python block after the `<!-- pandas example -->` marker.
fn example() -> String {
    let page = std::fs::read_to_string(workspace_root().join("docs/sweep.md")).unwrap();
    let (_, after) = page
        .split_once("<!-- pandas example -->\n```python\n")
        .expect("docs/sweep.md has the pandas example");
    let (code, _) = after.split_once("```").unwrap();
    code.to_string()
}

#[test]
fn the_pandas_example_draws_its_chart_from_the_committed_sample() {
    let code = example();
    // The distribution's python3 has the apt packages where another one on PATH may not.
    let python = ["python3", "/usr/bin/python3"].into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import pandas, matplotlib"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(python) = python else {
        eprintln!("SKIPPED: python3 cannot import pandas and matplotlib (scripts/setup.sh installs python3-pandas and python3-matplotlib)");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let root = workspace_root();
    // Run from the repository's root as the page says, with the chart written to a scratch
    // folder: the same code, the output path made absolute.
    let png = t.path().join("throughput-small.png");
    let code = code.replace("\"throughput-small.png\"", &format!("{png:?}"));
    let out = Command::new(python)
        .args(["-c", &code])
        .current_dir(&root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One median per Shoal arm and tar|ssh on the small files.
    assert!(stdout.contains("mode=quic-streams"), "{stdout}");
    assert!(stdout.contains("tar-ssh"), "{stdout}");
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "{}",
        bytes.len()
    );
}
