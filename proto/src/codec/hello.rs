//! The hello: the first message of every sender stream (who sends what, under which token).

use bytes::BufMut;

use super::*;

/// The first message of a connection: who is sending what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub run_id: [u8; 16],
    pub token: Vec<u8>,
    pub mode: Mode,
    /// Files of the whole run, or [`TOTALS_UNKNOWN`]: a sender that walks its tree while it
    /// sends does not know them yet. The receiver never relies on them for its limits (it
    /// enforces those on what arrives); when known it refuses an announcement over them up
    /// front and checks the run's end against them.
    pub file_count: u64,
    /// Content bytes of the whole run, or [`TOTALS_UNKNOWN`] (as `file_count`).
    pub total_bytes: u64,
    pub conn_index: u16,
    pub conn_count: u16,
    /// Most per-file streams the sender keeps outstanding on one connection (streams modes);
    /// the receiver refuses a run that asks for more than it allows.
    pub max_streams: u32,
    /// Congestion controller the sender asked for (`None`: system default); the receiver uses
    /// the same on its TCP sockets.
    pub cc: Option<crate::wire::Cc>,
}

/// `file_count` and `total_bytes` of a hello whose sender does not know them (protocol 4).
pub const TOTALS_UNKNOWN: u64 = u64::MAX;

impl Hello {
    /// The run's (files, bytes) as announced, if the sender knew them when it connected.
    pub fn announced(&self) -> Option<(u64, u64)> {
        (self.file_count != TOTALS_UNKNOWN && self.total_bytes != TOTALS_UNKNOWN)
            .then_some((self.file_count, self.total_bytes))
    }
}

pub(super) fn decode_hello(input: &[u8]) -> Result<Option<(Hello, usize)>, DecodeError> {
    if input.len() < 4 {
        // Refuse a wrong magic as soon as the bytes that differ have arrived.
        if input.iter().zip(MAGIC.iter()).any(|(a, b)| a != b) {
            let mut got = [0u8; 4];
            got[..input.len()].copy_from_slice(input);
            return Err(DecodeError::BadMagic(got));
        }
        return Ok(None);
    }
    let magic: [u8; 4] = input[..4].try_into().expect("4 bytes");
    if magic != MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    let Some(version) = read_u16(input, 4) else {
        return Ok(None);
    };
    if version != PROTOCOL_VERSION {
        return Err(DecodeError::UnsupportedVersion { got: version });
    }
    let Some(body_len) = read_u32(input, 6) else {
        return Ok(None);
    };
    let body_len = body_len as usize;
    if body_len > MAX_HELLO_BODY {
        return Err(DecodeError::HelloTooLarge(body_len));
    }
    let Some(body) = input.get(HELLO_PREFIX..HELLO_PREFIX + body_len) else {
        return Ok(None);
    };
    const FIXED: usize = 16 + 1 + 1 + 2 + 2 + 4 + 8 + 8 + 2;
    if body.len() < FIXED {
        return Err(DecodeError::BadHello("body shorter than its fixed fields"));
    }
    let run_id: [u8; 16] = body[..16].try_into().expect("16 bytes");
    let mode = Mode::from_wire(body[16]).ok_or(DecodeError::BadHello("unknown mode"))?;
    let cc = crate::wire::Cc::from_wire(body[17])
        .ok_or(DecodeError::BadHello("unknown congestion controller"))?;
    let conn_index = read_u16(body, 18).expect("fixed");
    let conn_count = read_u16(body, 20).expect("fixed");
    let max_streams = read_u32(body, 22).expect("fixed");
    let file_count = read_u64(body, 26).expect("fixed");
    let total_bytes = read_u64(body, 34).expect("fixed");
    let token_len = read_u16(body, 42).expect("fixed") as usize;
    if token_len > MAX_TOKEN {
        return Err(DecodeError::BadHello("token longer than 1024 bytes"));
    }
    let token = body
        .get(FIXED..FIXED + token_len)
        .ok_or(DecodeError::BadHello(
            "token runs past the end of the hello",
        ))?
        .to_vec();
    if conn_count == 0 || conn_index >= conn_count {
        return Err(DecodeError::BadHello(
            "connection index outside the connection count",
        ));
    }
    // Bytes after the token are reserved for later versions' fields and ignored.
    let hello = Hello {
        run_id,
        token,
        mode,
        file_count,
        total_bytes,
        conn_index,
        conn_count,
        max_streams,
        cc,
    };
    Ok(Some((hello, HELLO_PREFIX + body_len)))
}

/// Appends a hello (to any buffer: the sender's pooled staging buffer is a `Vec<u8>`). Panics if
/// the token exceeds [`MAX_TOKEN`] (the caller's bug).
pub fn encode_hello(hello: &Hello, out: &mut impl BufMut) {
    assert!(hello.token.len() <= MAX_TOKEN, "token too long");
    let body_len = 16 + 1 + 1 + 2 + 2 + 4 + 8 + 8 + 2 + hello.token.len();
    out.put_slice(&MAGIC);
    out.put_u16(PROTOCOL_VERSION);
    out.put_u32(body_len as u32);
    out.put_slice(&hello.run_id);
    out.put_u8(hello.mode.to_wire());
    out.put_u8(crate::wire::Cc::to_wire(hello.cc));
    out.put_u16(hello.conn_index);
    out.put_u16(hello.conn_count);
    out.put_u32(hello.max_streams);
    out.put_u64(hello.file_count);
    out.put_u64(hello.total_bytes);
    out.put_u16(hello.token.len() as u16);
    out.put_slice(&hello.token);
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn unknown_totals_round_trip_and_are_not_announced() {
        let mut hello = Hello {
            run_id: [7; 16],
            token: b"t".to_vec(),
            mode: Mode::TcpBundle,
            file_count: TOTALS_UNKNOWN,
            total_bytes: TOTALS_UNKNOWN,
            conn_index: 0,
            conn_count: 1,
            max_streams: 1,
            cc: None,
        };
        let mut out = BytesMut::new();
        encode_hello(&hello, &mut out);
        let (back, n) = decode_hello(&out).unwrap().unwrap();
        assert_eq!((back.clone(), n), (hello.clone(), out.len()));
        assert_eq!(back.announced(), None);
        (hello.file_count, hello.total_bytes) = (3, 12);
        assert_eq!(hello.announced(), Some((3, 12)));
        // One unknown figure makes the announcement unknown.
        hello.total_bytes = TOTALS_UNKNOWN;
        assert_eq!(hello.announced(), None);
    }
}
