//! runs.csv rows written by earlier builds, read under today's column names (docs/sweep.md,
//! "Earlier column names"): committed sweeps stay as they were recorded, and every reader sees
//! one name, one type and one unit per column.

use std::collections::BTreeMap;

use crate::columns::{col, triple, Col};

/// What the congestion controller's implementation is called when quinn runs it (QUIC).
pub const QUINN: &str = "quinn";
/// The kernel's own controllers (TCP, and the baselines' TCP connections).
pub const LINUX: &str = "linux";

/// Rewrites a row of an earlier runs.csv under today's names, in place; a row already in
/// today's shape is left as it is.
pub fn upgrade(row: &mut BTreeMap<String, String>) {
    // `cc` held `quinn-cubic` for QUIC: the controller and its implementation, apart.
    if !row.contains_key(col::CC_IMPL.name()) {
        let cc = row.get(col::CC.name()).cloned().unwrap_or_default();
        let (name, imp) = split_cc(&cc);
        let imp = if cc.is_empty() { "" } else { imp };
        row.insert(col::CC.name().into(), name.into());
        row.insert(col::CC_IMPL.name().into(), imp.into());
    }
    // `link_loss` was a fraction; the matrix and `shoal link` take a percentage.
    if let Some(f) = row.remove("link_loss") {
        let pct = f.parse::<f64>().map(loss_percent).unwrap_or(f);
        row.insert(col::LINK_LOSS_PERCENT.name().into(), pct);
    }
    // `tcp_wmem`/`tcp_rmem` held the kernel's three numbers in one cell.
    for (old, new) in TRIPLES {
        if let Some(v) = row.remove(*old) {
            for (c, x) in new.iter().zip(triple(&v)) {
                row.insert(c.name().into(), x);
            }
        }
    }
    // `connection_bytes` was an integer with one connection and `a/b/c` with several.
    if let Some(v) = row.remove("connection_bytes") {
        let each: Vec<u64> = v.split('/').filter_map(|x| x.parse().ok()).collect();
        let (total, list) = if each.is_empty() {
            (String::new(), String::new())
        } else {
            (each.iter().sum::<u64>().to_string(), connection_list(&each))
        };
        row.insert("connection_bytes_total".into(), total);
        row.insert("connection_bytes_each".into(), list);
    }
    if let Some(v) = row.remove("link_late_max_us") {
        row.insert(col::LINK_LATE_MAX_SINCE_UP_US.name().into(), v);
    }
}

/// The old `tcp_wmem`/`tcp_rmem` columns and the three that replace each.
const TRIPLES: &[(&str, [Col; 3])] = &[
    ("link_snd_tcp_wmem", col::LINK_SND_TCP_WMEM),
    ("link_snd_tcp_rmem", col::LINK_SND_TCP_RMEM),
    ("link_rcv_tcp_rmem", col::LINK_RCV_TCP_RMEM),
    ("link_rcv_tcp_wmem", col::LINK_RCV_TCP_WMEM),
];

/// A controller name as transports report it (`quinn-bbr`, `bbr`): the controller and its
/// implementation.
pub fn split_cc(cc: &str) -> (&str, &'static str) {
    match cc.strip_prefix("quinn-") {
        Some(name) => (name, QUINN),
        None => (cc, LINUX),
    }
}

/// The label the report, charts and medians.csv give a row's controller: `quinn-bbr` for
/// quinn's, the kernel's name for the kernel's.
pub fn cc_label(row: &BTreeMap<String, String>) -> String {
    let cc = row.get(col::CC.name()).map_or("", String::as_str);
    match row.get(col::CC_IMPL.name()).map(String::as_str) {
        Some(QUINN) if !cc.is_empty() && !cc.starts_with("quinn-") => format!("{QUINN}-{cc}"),
        _ => cc.to_string(),
    }
}

/// A loss fraction as the percentage the column holds (`0.001` → `0.1`), without the float
/// noise of the product.
pub fn loss_percent(fraction: f64) -> String {
    let p = format!("{:.9}", fraction * 100.0);
    let p = p.trim_end_matches('0').trim_end_matches('.');
    if p.is_empty() || p == "-" {
        "0".into()
    } else {
        p.to_string()
    }
}

/// The per-connection bytes as the column holds them: a JSON list, a string in every sweep.
pub fn connection_list(each: &[u64]) -> String {
    serde_json::to_string(each).expect("a list of numbers serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[(&str, &str)]) -> BTreeMap<String, String> {
        cells
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_earlier_row_reads_under_todays_names() {
        let mut r = row(&[
            ("cc", "quinn-bbr"),
            ("link_loss", "0.001"),
            ("link_snd_tcp_wmem", "4096 16384 67108864"),
            ("connection_bytes", "10/20/30"),
            ("link_late_max_us", "7341"),
        ]);
        upgrade(&mut r);
        let want = row(&[
            ("cc", "bbr"),
            ("cc_impl", "quinn"),
            ("link_loss_percent", "0.1"),
            ("link_snd_tcp_wmem_min_bytes", "4096"),
            ("link_snd_tcp_wmem_default_bytes", "16384"),
            ("link_snd_tcp_wmem_max_bytes", "67108864"),
            ("connection_bytes_total", "60"),
            ("connection_bytes_each", "[10,20,30]"),
            ("link_late_max_since_up_us", "7341"),
        ]);
        assert_eq!(r, want);
        assert_eq!(cc_label(&r), "quinn-bbr");
        // Today's rows are left alone; one connection is still a list.
        let mut today = want.clone();
        upgrade(&mut today);
        assert_eq!(today, want);
        let mut one = row(&[("cc", "cubic"), ("connection_bytes", "33554432")]);
        upgrade(&mut one);
        assert_eq!(one["cc_impl"], "linux");
        assert_eq!(one["connection_bytes_each"], "[33554432]");
        let mut baseline = row(&[("cc", "")]);
        upgrade(&mut baseline);
        assert_eq!(baseline["cc_impl"], "");
        assert_eq!(loss_percent(0.0002), "0.02");
        assert_eq!(loss_percent(0.0), "0");
        assert_eq!(loss_percent(0.01), "1");
    }
}
