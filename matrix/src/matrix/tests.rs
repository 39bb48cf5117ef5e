use super::*;

const M: &str = r#"
[sweep]
runs = 3
reference = { mode = "tcp-bundle", connections = 1 }
[link]
name = "t1"
rtt = "20ms"
rate = "100mbit"
[payload.small]
files = 10
size = "4KiB"
[payload.big]
files = 1
size = 4096
[axes]
payload = ["small", "big"]
mode = ["tcp-bundle", "quic-bundle"]
connections = [1, 8]
[[also]]
kind = ["tar-ssh", "sftp"]
mode = ["tcp-bundle", "quic-bundle"]
[[exclude]]
payload = "big"
connections = 8
"#;

#[test]
fn product_exclude_and_baselines() {
    let m = Matrix::parse(
        M.replace("[[also]]\n", "[[also]]\npayload = \"small\"\n")
            .as_str(),
    )
    .unwrap();
    let labels: Vec<String> = m.configs.iter().map(|c| c.label()).collect();
    // small: 2 modes × 2 connections; big: 2 modes × 1; baselines deduplicated: 2.
    assert_eq!(labels.len(), 4 + 2 + 2, "{labels:#?}");
    assert_eq!(
        labels[0],
        "payload=small kind=shoal mode=tcp-bundle connections=1"
    );
    assert_eq!(labels[6], "payload=small kind=tar-ssh");
    assert_eq!(m.configs[0].id, "c01");
    assert_eq!(m.axes, vec!["payload", "kind", "mode", "connections"]);
    assert!(m.configs[0].matches(&m.reference));
    assert!(!m.configs[6].matches(&m.reference));
}

#[test]
fn shipped_matrices_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/matrices");
    let count = |name: &str| Matrix::load(&dir.join(name)).unwrap().configs.len();
    // … and rclone × 2 transfer counts, iperf3 × 2 payloads × 2 controllers.
    let tools = 2 + 4;
    assert_eq!(count("quick.toml"), 8 + 4 + 1 + tools);
    // 2 payloads × 4 modes × 2 controllers × 2 connection counts, 3 baselines, 2 on the
    // 1,024-file subset.
    assert_eq!(count("study.toml"), 32 + 3 + 2 + tools);
    assert_eq!(count("flow-control.toml"), 2 * 3 * 2 - 3);
    assert_eq!(count("study-sftp-3min.toml"), 32 + 3 + 2 + tools);
    // 4 modes × 2 controllers × 2 connection counts, tar-local and tar-tcp; rclone × 2,
    // iperf3 × 2 controllers.
    assert_eq!(count("study-1gbit.toml"), 16 + 2 + 2 + 2);
    // 2 QUIC modes × 2 controllers × 8 connections, and the tcp-bundle bbr ×8 anchor.
    assert_eq!(count("study-quic8.toml"), 4 + 1);
    // 2 modes × 2 controllers × 2 connection counts, and 2 per-file modes with BBR.
    assert_eq!(count("study-loss.toml"), 8 + 2);
    // Issue 43's passes: QUIC 2 controllers × 2 buffers × 2 stall settings, TCP 2 × 2, the
    // long stall × 2 controllers, the 0.595-cut build × 2 stall settings.
    assert_eq!(count("study-stalls.toml"), 8 + 4 + 2 + 2);
    assert_eq!(count("study-longstall.toml"), 2 + 1);
    assert_eq!(count("study-hog.toml"), 4 + 2);
    assert_eq!(count("study-btrfs.toml"), 4 + 4);
    // QUIC 2 controllers × 3 quota periods × with and without the hog; TCP 2 × 2 host
    // buffers; QUIC 2 controllers × 3 stall settings.
    assert_eq!(count("study-hog-periods.toml"), 2 * 3 * 2);
    assert_eq!(count("study-tcpmem.toml"), 2 * 2);
    assert_eq!(count("study-stall-range.toml"), 2 * 3);
    let study = Matrix::load(&dir.join("study.toml")).unwrap();
    let refs: Vec<_> = study
        .configs
        .iter()
        .filter(|c| c.matches(&study.reference))
        .map(|c| c.payload().to_string())
        .collect();
    assert_eq!(refs, ["small", "large", "subset"]);
}

#[test]
fn the_controller_in_effect_is_named_when_it_is_not_an_axis_and_differs() {
    let m = |axes: &str| {
        let mut m = Matrix::parse(&format!(
            "[link]\nrtt = \"20ms\"\nrate = \"1gbit\"\n[payload.p]\nfiles = 1\nsize = 1\n{axes}"
        ))
        .unwrap();
        m.note_cc_in_effect("cubic");
        m.configs.iter().map(|c| c.label()).collect::<Vec<_>>()
    };
    assert_eq!(
        m("[axes]\nmode = [\"tcp-bundle\", \"quic-bundle\"]\n"),
        [
            "payload=p kind=shoal mode=tcp-bundle [cc=cubic]",
            "payload=p kind=shoal mode=quic-bundle [cc=quinn-cubic]"
        ]
    );
    // All TCP, one controller: nothing to say.
    assert_eq!(
        m("[axes]\nmode = [\"tcp-bundle\", \"tcp-streams\"]\n"),
        [
            "payload=p kind=shoal mode=tcp-bundle",
            "payload=p kind=shoal mode=tcp-streams"
        ]
    );
    // A cc axis names it; the baseline beside it (no cc axis) gets the host's.
    assert_eq!(
        m("[axes]\nmode = [\"quic-bundle\"]\ncc = [\"bbr\"]\n[[also]]\nkind = [\"tar-ssh\", \"tar-local\"]\n"),
        [
            "payload=p kind=shoal mode=quic-bundle cc=bbr",
            "payload=p kind=tar-ssh [cc=cubic]",
            "payload=p kind=tar-local"
        ]
    );
}

#[test]
fn errors_are_named() {
    let e = Matrix::parse(&M.replace("size = 4096", "size = \"4 potatoes\"")).unwrap_err();
    assert!(format!("{e:#}").contains("[payload.big] size"), "{e:#}");
    let e = Matrix::parse(&M.replace("[[also]]\n", "[[also]]\npayload = \"nope\"\n")).unwrap_err();
    assert!(format!("{e:#}").contains("payload nope"), "{e:#}");
    let e = Matrix::parse(&M.replace("name = \"t1\"", "name = \"waytoolong\"")).unwrap_err();
    assert!(format!("{e:#}").contains("8 characters"), "{e:#}");
    // A reference that picks nothing, or two configurations of one payload.
    let m = M.replace("[[also]]\n", "[[also]]\npayload = \"small\"\n");
    let e = Matrix::parse(&m.replace("\"tcp-bundle\", connections", "\"tcp-bundel\", connections"))
        .unwrap_err();
    assert!(
        format!("{e:#}").contains("no configuration matches"),
        "{e:#}"
    );
    let e = Matrix::parse(&m.replace(
        "mode = \"tcp-bundle\", connections = 1 }",
        "kind = \"shoal\" }",
    ))
    .unwrap_err();
    assert!(
        format!("{e:#}").contains("4 configurations match for payload small"),
        "{e:#}"
    );
}

#[test]
fn unknown_keys_and_bad_values_are_located() {
    let e = |from: &str, to: &str| {
        assert!(M.contains(from), "{from}");
        format!("{:#}", Matrix::parse(&M.replace(from, to)).unwrap_err())
    };
    let m = e("rtt = \"20ms\"", "rtt = \"20 parsecs\"");
    assert!(m.contains("line 7, [link] rtt = \"20 parsecs\": "), "{m}");
    assert!(m.contains("unknown duration unit 'parsecs'"), "{m}");
    let m = e("runs = 3", "runs = 3\nruns_per = 3");
    assert!(
        m.contains("[sweep] runs_per = 3: unknown field `runs_per`"),
        "{m}"
    );
    let m = e("[payload.big]\n", "[payload.big]\nfile = 1\n");
    assert!(
        m.contains("[payload.big] file = 1: unknown field `file`"),
        "{m}"
    );
    let m = e("name = \"t1\"", "name = \"t1\"\nbackend = \"tc\"");
    assert!(
        m.contains("[link] backend = \"tc\": unknown variant `tc`"),
        "{m}"
    );
    let m = e("[[exclude]]", "[bogus]\n[[exclude]]");
    assert!(m.contains("[bogus]: unknown field `bogus`"), "{m}");
    let m = e("rate = \"100mbit\"\n", "");
    assert!(m.contains("[link] needs rate"), "{m}");
}

#[test]
fn traces_switch_and_per_run_file_axes() {
    let base = M.replace("[[also]]\n", "[[also]]\npayload = \"small\"\n");
    assert_eq!(Matrix::parse(&base).unwrap().traces, None);
    let off = base.replace("runs = 3", "runs = 3\ntraces = false");
    assert_eq!(Matrix::parse(&off).unwrap().traces, Some(false));
    for axis in ["stats-out", "latency-out", "trace-dir"] {
        let m = base.replace(
            "connections = [1, 8]",
            &format!("connections = [1, 8]\n{axis} = [\"x.csv\"]"),
        );
        let e = format!("{:#}", Matrix::parse(&m).unwrap_err());
        assert!(
            e.contains(&format!("axis {axis}: every run would write the same file")),
            "{e}"
        );
        assert!(e.contains("OUT/traces/<config_id>-r<run>/"), "{e}");
    }
    let m = base.replace(
        "connections = [1, 8]",
        "connections = [1, 8]\nstats-interval = [\"50ms\"]",
    );
    Matrix::parse(&m).unwrap();
}

#[test]
fn tool_axes_go_to_their_tool_alone() {
    let m = |axes: &str| {
        Matrix::parse(&format!(
            "[link]\nrtt = \"20ms\"\nrate = \"1gbit\"\n[payload.p]\nfiles = 1\nsize = 1\n{axes}"
        ))
    };
    let labels = |axes: &str| {
        m(axes)
            .unwrap()
            .configs
            .iter()
            .map(|c| c.label())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        labels(
            "[axes]\nkind = [\"shoal\", \"sftp\", \"rclone\", \"iperf3\"]\ncc = [\"cubic\", \"bbr\"]\n\
             rclone-transfers = [4, 16]\n"
        ),
        [
            "payload=p kind=shoal cc=cubic",
            "payload=p kind=shoal cc=bbr",
            "payload=p kind=sftp",
            "payload=p kind=rclone rclone-transfers=4",
            "payload=p kind=rclone rclone-transfers=16",
            "payload=p kind=iperf3 cc=cubic",
            "payload=p kind=iperf3 cc=bbr",
        ]
    );
    let e = m("[axes]\nkind = [\"rclone\"]\nrclone-transfers = [0]\n").unwrap_err();
    assert!(format!("{e:#}").contains("rclone-transfers = 0"), "{e:#}");
    let e = m("[axes]\nkind = [\"iperf3\"]\ncc = [\"cubik\"]\n").unwrap_err();
    assert!(
        format!("{e:#}").contains("iperf3 takes cubic, bbr or reno"),
        "{e:#}"
    );
}

#[test]
fn the_links_tcp_memory_is_the_links_default_or_a_size_in_its_range() {
    let emulated = |m: &str| match Matrix::parse(m).unwrap().link {
        LinkSpec::Emulated(e) => e,
        other => panic!("{other:?}"),
    };
    let base = "[link]\nname = \"t1\"\nrtt = \"20ms\"\nrate = \"100mbit\"\n\
                [payload.small]\nfiles = 10\nsize = \"4KiB\"\n[axes]\nmode = [\"tcp-bundle\"]\n";
    assert_eq!(emulated(base).tcp_mem_max, 64 << 20);
    let with = |v: &str| {
        base.replace(
            "rate = \"100mbit\"",
            &format!("rate = \"100mbit\"\ntcp_mem_max = {v}"),
        )
    };
    let e = emulated(&with("\"32MiB\""));
    assert_eq!(e.tcp_mem_max, 32 << 20);
    assert_eq!(e.up_config().tcp_mem_max, 32 << 20);
    assert_eq!(emulated(&with("6291456")).tcp_mem_max, 6_291_456);
    let err = format!("{:#}", Matrix::parse(&with("\"1\"")).unwrap_err());
    assert!(err.contains("tcp_mem_max"), "{err}");
}
