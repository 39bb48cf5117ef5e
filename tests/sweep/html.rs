//! report.html: drawn by a real browser (headless Chromium, installed by scripts/setup.sh) with
//! its charts and its table, and loading nothing from outside itself, even when runs.csv holds
//! markup.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{needs_tools, shoal, workspace_root};

/// The committed sample with traces, copied, and `shoal report --html` run on the copy.
fn sample_report(t: &Path) -> PathBuf {
    let dir = t.join("sample");
    let src = workspace_root().join("results/samples/traces");
    let st = Command::new("cp")
        .arg("-r")
        .arg(&src)
        .arg(&dir)
        .status()
        .unwrap();
    assert!(st.success());
    let o = shoal()
        .arg("report")
        .arg(&dir)
        .arg("--html")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The medians table is printed, and report.html among the files.
    assert!(out.contains("tcp-bundle cc=cubic"), "{out}");
    assert!(out.contains("report.html"), "{out}");
    dir.join("report.html")
}

/// Headless Chromium's screenshot of `page`, `w` × `h` pixels, as RGB rows.
fn screenshot(page: &Path, w: u32, h: u32, t: &Path) -> (usize, usize, Vec<u8>) {
    let shot = t.join("shot.png");
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--user-data-dir={}", t.join("profile").display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("--window-size={w},{h}"))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let decoder = png::Decoder::new(std::fs::File::open(&shot).expect("screenshot"));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let (width, height) = (info.width as usize, info.height as usize);
    let mut rgb = Vec::with_capacity(width * height * 3);
    for px in buf[..info.buffer_size()].chunks(channels) {
        rgb.extend_from_slice(&px[..3]);
    }
    (width, height, rgb)
}

fn near(p: &[u8], c: (u8, u8, u8), tol: i32) -> bool {
    (p[0] as i32 - c.0 as i32).abs() <= tol
        && (p[1] as i32 - c.1 as i32).abs() <= tol
        && (p[2] as i32 - c.2 as i32).abs() <= tol
}

#[test]
fn report_html_is_drawn_by_a_browser_with_its_charts_and_table() {
    needs_tools(&["chromium"]);
    let t = tempfile::tempdir().unwrap();
    let page = sample_report(t.path());
    let (w, h, rgb) = screenshot(&page, 1280, 7000, t.path());
    let px = |x: usize, y: usize| &rgb[(y * w + x) * 3..(y * w + x) * 3 + 3];
    let count = |y0: usize, y1: usize, f: &dyn Fn(&[u8]) -> bool| -> usize {
        (y0..y1)
            .map(|y| (0..w).filter(|&x| f(px(x, y))).count())
            .sum()
    };
    // Charts: the bar chart's bars (palette blue and orange at 75% over white) and the trace
    // charts' lines (palette blue, full strength).
    let bars_blue = count(0, h, &|p| near(p, (87, 153, 199), 3));
    let bars_orange = count(0, h, &|p| near(p, (255, 159, 74), 3));
    let lines = count(0, h, &|p| near(p, (31, 119, 180), 10));
    assert!(bars_blue > 5_000, "blue bar pixels {bars_blue}");
    assert!(bars_orange > 5_000, "orange bar pixels {bars_orange}");
    assert!(lines > 1_000, "line pixels {lines}");
    // The table: its header row (#f0f0f0), then the rows below it, each a line of cell
    // borders (#ccc) with text (dark pixels) between them.
    let header_y = (0..h)
        .find(|&y| {
            (0..w)
                .filter(|&x| near(px(x, y), (240, 240, 240), 0))
                .count()
                > 400
        })
        .expect("no table header drawn");
    let mut borders = 0;
    let mut y = header_y;
    let mut last_border = header_y;
    while y < h && y - last_border < 60 {
        if (0..w)
            .filter(|&x| near(px(x, y), (204, 204, 204), 6))
            .count()
            > 600
        {
            if y > last_border + 3 {
                borders += 1;
            }
            last_border = y;
        }
        y += 1;
    }
    let dark = count(header_y, last_border, &|p| p.iter().all(|&c| c < 110));
    eprintln!(
        "screenshot {w}×{h}: bar pixels {bars_blue} blue, {bars_orange} orange; line pixels \
         {lines}; table header at y {header_y}, {borders} row borders, {dark} text pixels"
    );
    // 13 configurations: at least that many row borders, and text in them.
    assert!(
        borders >= 13,
        "table row borders {borders} from y {header_y}"
    );
    assert!(dark > 5_000, "dark (text) pixels in the table {dark}");
}

/// Every tag of `html` (text between `<` and `>`; escaped text holds no `<`), lower-cased.
fn tags(html: &str) -> Vec<String> {
    html.split('<')
        .skip(1)
        .map(|s| s.split('>').next().unwrap_or("").to_lowercase())
        .collect()
}

fn assert_self_contained(html: &str) {
    for tag in tags(html) {
        for bad in [
            "src=", "href=", "http:", "https:", "url(", "@import", "xlink",
        ] {
            assert!(!tag.contains(bad), "tag <{tag}> holds {bad}");
        }
        for name in ["script", "link", "iframe", "img", "object", "embed", "base"] {
            assert!(
                !tag.starts_with(name)
                    || tag[name.len()..].starts_with(|c: char| c.is_alphanumeric()),
                "tag <{tag}>"
            );
        }
    }
    let style = html
        .split("<style>")
        .nth(1)
        .and_then(|s| s.split("</style>").next())
        .unwrap_or("");
    assert!(
        !style.contains("url(") && !style.contains("@import"),
        "{style}"
    );
}

#[test]
fn report_html_loads_nothing_from_outside_itself() {
    let t = tempfile::tempdir().unwrap();
    let page = sample_report(t.path());
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html);
    let lower = html.to_lowercase();
    for bad in ["http:", "https:", "url(", "@import", "src=", "href="] {
        assert!(!lower.contains(bad), "report.html holds {bad}");
    }
    assert!(html.contains("<svg"), "charts inlined");

    // Markup in runs.csv is text in the page, never a tag.
    let dir = t.path().join("hostile");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("runs.csv"),
        "config_id,config,kind,payload,status,seconds,mb_per_s,error\n\
         c01,\"<img src=\"\"http://example.com/x.png\"\">\",shoal,<script>p</script>,ok,1,10,\n\
         c01,\"<img src=\"\"http://example.com/x.png\"\">\",shoal,<script>p</script>,failed,1,0,\
         \"<link rel=stylesheet href=https://example.com/s.css>\"\n",
    )
    .unwrap();
    let o = shoal()
        .arg("report")
        .arg(&dir)
        .arg("--html")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("&lt;img src=&quot;http://example.com/x.png&quot;&gt;"));
}

#[test]
fn compare_html_is_self_contained_and_refuses_different_links() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let b = t.path().join("b");
    let src = workspace_root().join("results/samples/quick/runs.csv");
    for d in [&a, &b] {
        std::fs::create_dir(d).unwrap();
        std::fs::copy(&src, d.join("runs.csv")).unwrap();
    }
    let page = t.path().join("cmp.html");
    let o = shoal()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("same in A and B: link, commit, kernel, load, matrix"),
        "{out}"
    );
    // The matrix's order (small files first), not the alphabet's.
    let small = out
        .find("payload=small kind=shoal mode=tcp-bundle cc=cubic")
        .unwrap();
    let large = out
        .find("payload=large kind=shoal mode=tcp-bundle cc=cubic")
        .unwrap();
    assert!(small < large, "{out}");
    // 3 runs against 3: the interval's real coverage and the smallest p.
    assert!(out.contains("≥ 56%") && out.contains("(0.100)"), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("<svg") && html.contains("medians-table"));

    // B over another link: refused, then compared with --force.
    let text = std::fs::read_to_string(&src).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let rtt = header.split(',').position(|c| c == "link_rtt_ms").unwrap();
    let mut changed = vec![header.to_string()];
    for l in lines {
        let mut cells: Vec<String> = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(l.as_bytes())
            .records()
            .next()
            .unwrap()
            .unwrap()
            .iter()
            .map(str::to_string)
            .collect();
        cells[rtt] = "50".into();
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&cells).unwrap();
        changed.push(
            String::from_utf8(w.into_inner().unwrap())
                .unwrap()
                .trim_end()
                .to_string(),
        );
    }
    std::fs::write(b.join("runs.csv"), changed.join("\n") + "\n").unwrap();
    let o = shoal().arg("compare").arg(&a).arg(&b).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "compared different links");
    assert!(
        err.contains("link differs") && err.contains("--force"),
        "{err}"
    );
    let o = shoal()
        .args(["compare", "--force"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("link differs"), "{out}");
}

#[test]
fn report_mbit_draws_beside_the_mb_per_s_chart() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("q");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(
        workspace_root().join("results/samples/quick/runs.csv"),
        dir.join("runs.csv"),
    )
    .unwrap();
    let o = shoal().arg("report").arg(&dir).output().unwrap();
    assert!(o.status.success());
    let png = std::fs::read(dir.join("throughput.png")).unwrap();
    let o = shoal()
        .arg("report")
        .arg(&dir)
        .arg("--mbit")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(std::fs::read(dir.join("throughput.png")).unwrap(), png);
    let svg = std::fs::read_to_string(dir.join("throughput-mbit.svg")).unwrap();
    assert!(svg.contains("Mbit/s") && dir.join("throughput-mbit.png").exists());
}
