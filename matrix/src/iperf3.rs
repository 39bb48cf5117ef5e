//! The `iperf3` arm's command lines and what its JSON result says (`iperf3 -J`, 3.x): pure,
//! run by the sweep (sweep/src/transfer/iperf3.rs).

use anyhow::{bail, Context, Result};

/// The port `iperf3 -s` listens on (iperf3's own default).
pub const PORT: u16 = 5201;

/// `iperf3 -s -1`: one test, then exit; bound to `bind` when given. `--forceflush`: its
/// "Server listening" line reaches the sweep through a pipe at once.
pub fn server_argv(bind: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = ["-s", "-1", "--forceflush", "-p"]
        .map(String::from)
        .to_vec();
    v.push(PORT.to_string());
    if let Some(b) = bind {
        v.extend(["-B".to_string(), b.to_string()]);
    }
    v
}

/// `iperf3 -c ADDR -n BYTES [-C CC] -J`: `bytes` in one TCP flow, the result as JSON.
pub fn client_argv(addr: &str, bytes: u64, cc: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "-c".into(),
        addr.into(),
        "-p".into(),
        PORT.to_string(),
        "-n".into(),
        bytes.to_string(),
    ];
    if let Some(cc) = cc {
        v.extend(["-C".to_string(), cc.to_string()]);
    }
    v.push("-J".into());
    v
}

/// What iperf3's JSON says of the flow.
#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    /// `end.sum_received`: bytes the server received, over its seconds, at its rate.
    pub bytes_received: u64,
    pub seconds: f64,
    pub bits_per_second: f64,
    /// `end.sum_sent.retransmits`.
    pub retransmits: Option<u64>,
    /// `end.sender_tcp_congestion`: the controller the flow ran.
    pub cc: Option<String>,
}

/// Parses `iperf3 -J`'s output: the flow, or the error iperf3 reported.
pub fn parse(json: &str) -> Result<Flow> {
    let v: serde_json::Value =
        serde_json::from_str(json.trim()).context("iperf3 printed no JSON result")?;
    if let Some(e) = v["error"].as_str() {
        bail!("iperf3: {e}");
    }
    let end = &v["end"];
    let rx = &end["sum_received"];
    let (Some(bytes_received), Some(seconds), Some(bits_per_second)) = (
        rx["bytes"].as_u64(),
        rx["seconds"].as_f64(),
        rx["bits_per_second"].as_f64(),
    ) else {
        bail!("iperf3's JSON has no end.sum_received (bytes, seconds, bits_per_second)");
    };
    if bytes_received == 0 || seconds <= 0.0 {
        bail!("iperf3: the server received {bytes_received} bytes in {seconds} s");
    }
    Ok(Flow {
        bytes_received,
        seconds,
        bits_per_second,
        retransmits: end["sum_sent"]["retransmits"].as_u64(),
        cc: end["sender_tcp_congestion"].as_str().map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv() {
        assert_eq!(
            client_argv("198.18.0.2", 1 << 20, Some("bbr")).join(" "),
            "-c 198.18.0.2 -p 5201 -n 1048576 -C bbr -J"
        );
        assert_eq!(client_argv("b", 7, None).join(" "), "-c b -p 5201 -n 7 -J");
        assert_eq!(
            server_argv(Some("198.18.0.2")).join(" "),
            "-s -1 --forceflush -p 5201 -B 198.18.0.2"
        );
        assert_eq!(server_argv(None).join(" "), "-s -1 --forceflush -p 5201");
    }

    #[test]
    fn parses_the_received_rate_and_the_error() {
        // Trimmed from iperf3 3.12's -J output.
        let json = r#"{"start": {"test_start": {"bytes": 268435456}},
            "intervals": [],
            "end": {"streams": [],
              "sum_sent": {"start": 0, "end": 4.2, "seconds": 4.2, "bytes": 268435456,
                           "bits_per_second": 511305630.5, "retransmits": 17, "sender": true},
              "sum_received": {"start": 0, "end": 4.13, "seconds": 4.13, "bytes": 268173312,
                               "bits_per_second": 519464527.2, "sender": true},
              "sender_tcp_congestion": "bbr", "receiver_tcp_congestion": "cubic"}}"#;
        let f = parse(json).unwrap();
        assert_eq!(
            f,
            Flow {
                bytes_received: 268173312,
                seconds: 4.13,
                bits_per_second: 519464527.2,
                retransmits: Some(17),
                cc: Some("bbr".into()),
            }
        );
        let e = parse(r#"{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server: Connection refused"}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "iperf3: unable to connect to server: Connection refused"
        );
        assert!(parse("").is_err());
        assert!(parse(
            r#"{"end": {"sum_received": {"bytes": 0, "seconds": 0, "bits_per_second": 0}}}"#
        )
        .is_err());
    }
}
