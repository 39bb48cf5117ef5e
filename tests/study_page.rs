//! docs/results.md's generated regions (`<!-- generated: KIND PATH -->` … `<!-- end -->`) are
//! exactly what `scripts/study-tables.py` makes of the committed runs.csv files they name: every
//! number in them comes from the data. No root needed.

mod support;

use std::process::Command;

use support::workspace_root;

fn check(page: &std::path::Path) -> std::process::Output {
    let root = workspace_root();
    Command::new("python3")
        .arg(root.join("scripts/study-tables.py"))
        .arg("--page")
        .arg(page)
        .arg("--check")
        .current_dir(&root)
        .output()
        .expect("python3 (scripts/setup.sh installs it)")
}

#[test]
fn results_page_tables_are_generated_from_committed_runs() {
    let page = workspace_root().join("docs/results.md");
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(
        text.matches("<!-- generated: ").count() >= 2,
        "docs/results.md has no generated regions"
    );
    let o = check(&page);
    assert!(
        o.status.success(),
        "docs/results.md differs from its data; run scripts/study-tables.py --page docs/results.md\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_changed_number_in_a_generated_region_is_caught() {
    let text = std::fs::read_to_string(workspace_root().join("docs/results.md")).unwrap();
    let t = tempfile::tempdir().unwrap();
    let page = t.path().join("results.md");
    // The first table row inside the first generated region, its verified-run count changed.
    let start = text.find("<!-- generated: ").unwrap();
    let row = start + text[start..].find("| 5/5 |").unwrap();
    let edited = format!("{}| 4/5 |{}", &text[..row], &text[row + "| 5/5 |".len()..]);
    std::fs::write(&page, edited).unwrap();
    let o = check(&page);
    assert!(!o.status.success(), "an edited table passed the check");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("-") && out.contains("| 4/5 |"), "{out}");
}
