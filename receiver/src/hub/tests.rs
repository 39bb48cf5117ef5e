use super::*;

/// The cap is checked before a prepare creates anything (`check_prepare`), not only
/// when it registers.
#[test]
fn the_prepared_cap_refuses_before_anything_is_created() {
    let hub = Hub::default();
    {
        let mut prepared = hub.prepared.lock().unwrap();
        for i in 0..MAX_PREPARED as u128 {
            prepared.insert(i.to_be_bytes(), PathBuf::new());
        }
    }
    let e = hub.check_prepare(&[0xff; 16]).unwrap_err().to_string();
    assert!(e.contains("prepared already; clean some up first"), "{e}");
    hub.prepared.lock().unwrap().remove(&0u128.to_be_bytes());
    hub.check_prepare(&[0xff; 16]).unwrap();
    let e = hub.check_prepare(&1u128.to_be_bytes()).unwrap_err();
    assert!(e.to_string().contains("is prepared already"), "{e}");
}
