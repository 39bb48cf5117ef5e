//! A [`Manifest`] on the control channel: built from disk here, it travels as the entries of
//! the pure codec (`shoal_proto::control`).

use shoal_proto::control::{decode_manifest_entries, encode_manifest_entries, ControlError};

use crate::verify::Manifest;

/// A manifest as bytes (see [`encode_manifest_entries`]).
pub fn encode_manifest(m: &Manifest) -> Vec<u8> {
    encode_manifest_entries(&m.entries, m.skipped)
}

/// The inverse of [`encode_manifest`]; never trusts a count or a length.
pub fn decode_manifest(input: &[u8]) -> Result<Manifest, ControlError> {
    let (entries, skipped) = decode_manifest_entries(input)?;
    Ok(Manifest { entries, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::Entry;

    #[test]
    fn manifests_round_trip_and_lies_are_refused() {
        let mut m = Manifest::default();
        m.entries.insert(b"d".to_vec(), Entry::Dir);
        m.entries.insert(
            b"d/\xff name".to_vec(),
            Entry::File {
                size: 4096,
                sha256: [7; 32],
            },
        );
        m.skipped = 2;
        let bytes = encode_manifest(&m);
        let back = decode_manifest(&bytes).unwrap();
        assert_eq!(back.entries, m.entries);
        assert_eq!(back.skipped, 2);
        for cut in 0..bytes.len() {
            assert!(decode_manifest(&bytes[..cut]).is_err(), "cut {cut}");
        }
        // A count far beyond the bytes: refused without allocating for it.
        let mut lie = bytes.clone();
        lie[..8].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(decode_manifest(&lie).is_err());
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(decode_manifest(&extra).is_err());
    }
}
