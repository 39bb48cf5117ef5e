//! runs.csv as a sweep writes it and reads it back: each row serialised whole and written with
//! one `write` on a file opened for appending, then synced, so a sweep killed with SIGKILL at
//! any moment leaves every row whole or absent (a torn last record can only come from a crash
//! of the machine or a full disk); read back, a torn last record is found and dropped.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use shoal_report::columns::{col, Row};

/// runs.csv, open for appending whole rows.
pub struct RowLog {
    header: Vec<String>,
    file: std::fs::File,
}

fn record(fields: &[&str]) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(fields)?;
    w.into_inner().context("serialising a row")
}

impl RowLog {
    /// A new runs.csv holding the header.
    pub fn create(path: &Path, header: Vec<String>) -> Result<RowLog> {
        let _ = std::fs::remove_file(path);
        let mut log = Self::open(path, header)?;
        let h: Vec<&str> = log.header.iter().map(String::as_str).collect();
        let bytes = record(&h)?;
        log.put(&bytes)?;
        Ok(log)
    }

    /// The runs.csv read by [`recover`], cut to its whole rows, open for more.
    pub fn resume(path: &Path, header: Vec<String>, whole: u64) -> Result<RowLog> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        f.set_len(whole)
            .with_context(|| format!("cutting {} to its whole rows", path.display()))?;
        Self::open(path, header)
    }

    fn open(path: &Path, header: Vec<String>) -> Result<RowLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        Ok(RowLog { header, file })
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all(bytes)
            .and_then(|_| self.file.sync_data())
            .context("writing runs.csv")
    }

    pub fn write(&mut self, row: &Row) -> Result<()> {
        let cells: Vec<&str> = self.header.iter().map(|c| row.cell(c)).collect();
        let bytes = record(&cells)?;
        self.put(&bytes)
    }
}

/// A recorded row, as a continuation needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub config_id: String,
    pub run: u32,
    pub order: usize,
    pub ok: bool,
}

/// What runs.csv holds.
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    pub rows: Vec<Recorded>,
    /// Bytes of whole records (header included): the file is cut here before appending (0:
    /// no whole header, the file is written anew).
    pub whole: u64,
    /// Bytes of a torn last record, dropped.
    pub torn: u64,
}

/// Reads runs.csv written with `header`: every whole record, and a torn last one (cut short:
/// fewer cells than the header, or no final newline) set apart. Refuses a file with another
/// header or a bad record before its last.
pub fn recover(path: &Path, header: &[String]) -> Result<Recovered> {
    let data = match std::fs::read(path) {
        // Killed before its first row: nothing recorded.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Recovered::default()),
        r => r.with_context(|| format!("reading {}", path.display()))?,
    };
    parse(&data, header).with_context(|| format!("{}", path.display()))
}

fn parse(data: &[u8], header: &[String]) -> Result<Recovered> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(data);
    let mut rec = csv::StringRecord::new();
    // (end offset, cells) of each record read.
    let mut records: Vec<(u64, csv::StringRecord)> = Vec::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(true) => records.push((rdr.position().byte(), rec.clone())),
            Ok(false) => break,
            // Cut inside a quoted cell (or not UTF-8 where it was cut): torn from here.
            Err(_) => break,
        }
    }
    let Some((hdr_end, first)) = records
        .first()
        .filter(|(end, _)| data.get(*end as usize - 1) == Some(&b'\n'))
    else {
        // Not even a whole header: the file is started again.
        return Ok(Recovered {
            torn: data.len() as u64,
            ..Default::default()
        });
    };
    if first.iter().ne(header.iter().map(String::as_str)) {
        let theirs: Vec<&str> = first.iter().collect();
        let gone: Vec<&String> = header
            .iter()
            .filter(|h| !theirs.contains(&h.as_str()))
            .collect();
        bail!(
            "its columns are not this build's ({} against {}; first missing: {:?}): continue it \
             with the build that wrote it",
            theirs.len(),
            header.len(),
            gone.first()
        );
    }
    let mut out = Recovered {
        whole: *hdr_end,
        ..Default::default()
    };
    let col_of = |name: &str| header.iter().position(|h| h == name);
    let (ci, ri, oi, si) = (
        col_of(col::CONFIG_ID.name()),
        col_of(col::RUN.name()),
        col_of(col::ORDER.name()),
        col_of(col::STATUS.name()),
    );
    let n = records.len();
    for (i, (end, r)) in records.iter().enumerate().skip(1) {
        let last = i + 1 == n;
        let whole_line = data.get(*end as usize - 1) == Some(&b'\n');
        if r.len() != header.len() || !whole_line {
            if last {
                break;
            }
            bail!("record {i} has {} cells, not {}", r.len(), header.len());
        }
        let cell = |c: Option<usize>| c.and_then(|c| r.get(c)).unwrap_or("");
        out.rows.push(Recorded {
            config_id: cell(ci).to_string(),
            run: cell(ri).parse().unwrap_or(0),
            order: cell(oi).parse().unwrap_or(0),
            ok: cell(si) == "ok",
        });
        out.whole = *end;
    }
    out.torn = data.len() as u64 - out.whole;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Vec<String> {
        ["config_id", "run", "order", "status", "error"]
            .map(String::from)
            .to_vec()
    }

    fn row(id: &str, run: u32, order: usize, status: &str, error: &str) -> Row {
        let mut r = Row::new();
        r.set(col::CONFIG_ID, id.to_string());
        r.set(col::RUN, run.to_string());
        r.set(col::ORDER, order.to_string());
        r.set(col::STATUS, status.to_string());
        r.set(col::ERROR, error.to_string());
        r
    }

    #[test]
    fn every_cut_of_the_last_row_is_dropped_and_the_whole_rows_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("runs.csv");
        let mut log = RowLog::create(&p, header()).unwrap();
        log.write(&row("c01", 1, 1, "ok", "")).unwrap();
        log.write(&row(
            "c02",
            1,
            2,
            "failed",
            "a \"quoted\", multi-line\nerror",
        ))
        .unwrap();
        let two = std::fs::read(&p).unwrap();
        log.write(&row("c01", 2, 3, "ok", "")).unwrap();
        let three = std::fs::read(&p).unwrap();
        let all = recover(&p, &header()).unwrap();
        assert_eq!(all.rows.len(), 3);
        assert_eq!(all.torn, 0);
        assert_eq!(all.rows[1].config_id, "c02");
        assert!(!all.rows[1].ok);
        // Cut anywhere inside the third row (and inside the second's quoted cell).
        for cut in 1..three.len() {
            if cut >= two.len() || cut < two.len() - 1 {
                let got = parse(&three[..cut], &header());
                let Ok(got) = got else { continue };
                let expect = if cut >= two.len() { 2 } else { got.rows.len() };
                assert_eq!(got.rows.len(), expect, "cut at {cut}");
                assert_eq!(got.whole + got.torn, cut as u64);
            }
        }
        let cut = parse(&three[..three.len() - 1], &header()).unwrap();
        assert_eq!(cut.rows.len(), 2, "no final newline: torn");
        assert_eq!(cut.whole, two.len() as u64);
        // Cut to its whole rows, more rows follow.
        std::fs::write(&p, &three[..three.len() - 3]).unwrap();
        let r = recover(&p, &header()).unwrap();
        let mut log = RowLog::resume(&p, header(), r.whole).unwrap();
        log.write(&row("c01", 2, 3, "ok", "")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), three);
    }

    #[test]
    fn no_whole_header_is_nothing_recorded() {
        let r = parse(b"config_id,run,ord", &header()).unwrap();
        assert_eq!((r.whole, r.torn, r.rows.len()), (0, 17, 0));
        let r = parse(b"", &header()).unwrap();
        assert_eq!((r.whole, r.rows.len()), (0, 0));
    }

    #[test]
    fn another_header_is_refused() {
        let e = parse(b"a,b\n1,2\n", &header()).unwrap_err().to_string();
        assert!(e.contains("not this build's"), "{e}");
    }
}
