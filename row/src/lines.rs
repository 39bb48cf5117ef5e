//! The lines `shoal send` prints under its summary: where the run landed and how to check it,
//! and what a `--resume` run started from.

use shoal_proto::units::human_bytes;

use crate::row::RunRow;

impl RunRow {
    /// The run's id, its folder on the receiver and the command that checks it. The sender
    /// does not know the receiver's `--dest`: the folder is named relative to it.
    pub fn next_step_line(&self, src: &str) -> String {
        let id = &self.run_id;
        format!(
            "run {id}: on the receiver in DEST/{id}/ (DEST: its --dest; with recv --flat, DEST itself); check it: shoal verify {src} DEST/{id}"
        )
    }

    /// What a `--resume` run started from and what became of the jump (`None` without
    /// `--resume`, or for a failed run).
    pub fn resume_line(&self) -> Option<String> {
        match self.resume.as_str() {
            "" | "off" => None,
            "no-state" => Some(
                "resume: no fresh path state for this receiver, a cold start (an ok run saves the state the next --resume starts from)".into(),
            ),
            outcome => {
                let from = match self.resume_saved_window_bytes {
                    Some(w) => format!(
                        "the path state's saved window of {} (bounded by {})",
                        human_bytes(w),
                        self.resume_saved_window_cap
                    ),
                    None => "the path state".into(),
                };
                let jump = match self.resume_jump_bytes {
                    Some(j) if j > 0 => format!(", jump to {}", human_bytes(j)),
                    _ => ", no jump".into(),
                };
                Some(format!("resume: resumed from {from}{jump}; {outcome}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_run_says_so_and_from_what() {
        let mut r = RunRow {
            run_id: "ab12".into(),
            resume: "off".into(),
            ..Default::default()
        };
        assert_eq!(r.resume_line(), None);
        let next = r.next_step_line("/tmp/payload");
        assert!(
            next.starts_with("run ab12: on the receiver in DEST/ab12/"),
            "{next}"
        );
        assert!(
            next.ends_with("shoal verify /tmp/payload DEST/ab12"),
            "{next}"
        );
        r.resume = "no-state".into();
        assert!(r.resume_line().unwrap().contains("cold start"));
        r.resume = "validated".into();
        r.resume_saved_window_bytes = Some(8 << 20);
        r.resume_saved_window_cap = "peak".into();
        r.resume_jump_bytes = Some(4 << 20);
        assert_eq!(
            r.resume_line().unwrap(),
            "resume: resumed from the path state's saved window of 8.0 MiB (bounded by peak), jump to 4.0 MiB; validated"
        );
    }
}
