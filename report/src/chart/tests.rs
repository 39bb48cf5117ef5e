use super::*;

#[test]
fn rows_name_the_controller_in_effect_when_it_is_not_an_axis_and_differs() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("runs.csv");
    std::fs::write(
        &p,
        "config_id,config,kind,payload,param_mode,cc,status,seconds,mb_per_s\n\
         c01,a,shoal,p,tcp-bundle,cubic,ok,1,10\n\
         c02,b,shoal,p,quic-bundle,quinn-cubic,ok,1,10\n",
    )
    .unwrap();
    let rep = crate::report::load(&p, None).unwrap();
    let labels: Vec<String> = panels(&rep)[0]
        .rows
        .iter()
        .map(|(l, _)| l.clone())
        .collect();
    assert_eq!(
        labels,
        ["tcp-bundle · cc cubic", "quic-bundle · cc quinn-cubic"]
    );
    // One controller in effect: the label stays the mode.
    std::fs::write(
        &p,
        "config_id,config,kind,payload,param_mode,cc,status,seconds,mb_per_s\n\
         c01,a,shoal,p,tcp-bundle,cubic,ok,1,10\n\
         c02,b,shoal,p,tcp-streams,cubic,ok,1,10\n",
    )
    .unwrap();
    let rep = crate::report::load(&p, None).unwrap();
    let labels: Vec<String> = panels(&rep)[0]
        .rows
        .iter()
        .map(|(l, _)| l.clone())
        .collect();
    assert_eq!(labels, ["tcp-bundle", "tcp-streams"]);
}

#[test]
fn the_legend_names_the_baseline_tools_and_two_runs_are_a_mean() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("runs.csv");
    std::fs::write(
        &p,
        "config_id,config,kind,payload,param_mode,cc,status,seconds,mb_per_s\n\
         c01,a,shoal,p,tcp-bundle,cubic,ok,1,10\n\
         c01,a,shoal,p,tcp-bundle,cubic,ok,1,12\n\
         c02,b,tar-tcp,p,,cubic,ok,2,5\n",
    )
    .unwrap();
    let rep = crate::report::load(&p, None).unwrap();
    let svg = throughput_svg(&rep, ChartOptions::default()).unwrap();
    assert!(svg.contains("existing tool: tar-tcp"), "legend");
    assert!(!svg.contains("over ssh"));
    assert!(
        svg.contains("mean of 2, 2/2 ok"),
        "two runs: their mean, said"
    );
}
