use super::*;

#[test]
fn medians() {
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
}

fn medians_of(runs_csv: &str) -> Vec<BTreeMap<String, String>> {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("runs.csv"), runs_csv).unwrap();
    let rep = load(&t.path().join("runs.csv"), None).unwrap();
    write_medians(&rep, &t.path().join("medians.csv")).unwrap();
    let mut r = csv::Reader::from_path(t.path().join("medians.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            h.iter()
                .zip(rec.iter())
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        })
        .collect()
}

#[test]
fn arms_on_a_saturated_machine_are_flagged() {
    let m = medians_of(
        "config_id,config,payload,status,seconds,mb_per_s,host_all_cores_busy_share\n\
         c01,a,p,ok,1,10,0.80\n\
         c01,a,p,ok,1,10,0.60\n\
         c01,a,p,failed,1,0,0.10\n\
         c02,b,p,ok,1,10,0.10\n\
         c02,b,p,ok,1,10,0.70\n\
         c03,c,p,ok,1,10,\n",
    );
    assert_eq!(m[0]["median_host_all_cores_busy_share"], "0.60");
    assert_eq!(m[0]["host_saturated"], "true");
    assert_eq!(m[1]["median_host_all_cores_busy_share"], "0.40");
    assert_eq!(m[1]["host_saturated"], "false");
    assert_eq!(m[2]["host_saturated"], "", "not measured");
}

#[test]
fn the_timed_window_decides_saturation_where_the_rows_have_it() {
    // Start-up and exit around the transfer dilute the whole-transfer share.
    let m = medians_of(
        "config_id,config,payload,status,seconds,mb_per_s,host_all_cores_busy_share,data_all_cores_busy_share\n\
         c01,a,p,ok,1,10,0.44,0.55\n\
         c01,a,p,ok,1,10,0.40,0.61\n\
         c02,b,p,ok,1,10,0.40,\n",
    );
    assert_eq!(m[0]["median_host_all_cores_busy_share"], "0.42");
    assert_eq!(m[0]["median_data_all_cores_busy_share"], "0.58");
    assert_eq!(m[0]["host_saturated"], "true");
    assert_eq!(m[1]["median_data_all_cores_busy_share"], "");
    assert_eq!(m[1]["host_saturated"], "false");
}

#[test]
fn reference_keys_are_axes_first_and_must_pick_one_per_payload() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("runs.csv");
    std::fs::write(
        &p,
        "config_id,config,kind,payload,param_mode,param_cc,cc,status,seconds,mb_per_s\n\
         c01,a,shoal,p,tcp-bundle,cubic,cubic,ok,2,10\n\
         c02,b,shoal,p,quic-bundle,bbr,quinn-bbr,ok,1,20\n\
         c03,c,shoal,p,tcp-bundle,bbr,bbr,ok,1,20\n\
         c04,d,tar-ssh,p,,,cubic,ok,4,5\n",
    )
    .unwrap();
    let refs = |sel: &str| -> Result<Vec<String>> {
        let sel = parse_selector(sel)?;
        Ok(load(&p, Some(&sel))?
            .configs
            .iter()
            .filter(|c| c.is_reference)
            .map(|c| c.id.clone())
            .collect())
    };
    // cc=bbr is the axis: it matches QUIC's BBR (cc column quinn-bbr) too.
    assert_eq!(refs("mode=quic-bundle,cc=bbr").unwrap(), ["c02"]);
    assert_eq!(refs("mode=tcp-bundle,cc=cubic").unwrap(), ["c01"]);
    assert_eq!(refs("kind=tar-ssh").unwrap(), ["c04"]);
    // With a cc axis, cc names the axis: the cc column is not consulted.
    let e = format!("{:#}", refs("cc=quinn-bbr").unwrap_err());
    assert!(e.contains("no configuration matches"), "{e}");
    // A name that is no axis is a column.
    assert_eq!(refs("kind=tar-ssh,seconds=4").unwrap(), ["c04"]);
    let e = format!("{:#}", refs("cc=bbr").unwrap_err());
    assert!(
        e.contains("2 configurations match for payload p (c02 b; c03 c)"),
        "{e}"
    );
    let e = format!("{:#}", refs("mode=tcp-bundel").unwrap_err());
    assert!(e.contains("no configuration matches"), "{e}");
}

#[test]
fn selector() {
    let s = parse_selector("mode=tcp-bundle, cc=cubic").unwrap();
    assert_eq!(s[1], ("cc".to_string(), "cubic".to_string()));
    assert!(parse_selector("mode").is_err());
}
