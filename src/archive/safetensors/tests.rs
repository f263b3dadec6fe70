use super::*;

/// A file with `header` as its JSON text and `data` as its data region.
fn file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

fn err(header: &str, data: &[u8]) -> SourceError {
    parse(&file(header, data)).expect_err("must be refused")
}

/// Files people mistake for `.safetensors` are named for what they are, from their
/// first bytes, once the header length is seen not to fit.
#[test]
fn other_formats_are_named() {
    let what = |b: &[u8]| match parse(b) {
        Err(SourceError::OtherFormat { what }) => what,
        other => panic!("expected OtherFormat, got {:?}", other.err()),
    };
    assert!(what(b"{\"metadata\": {}, \"weight_map\": {}}").contains("JSON"));
    assert!(what(b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\n").contains("LFS"));
    assert!(what(b"PK\x03\x04\x00\x00\x08\x00archive/data.pkl").contains("zip"));
    assert!(what(b"\x80\x02\x8a\x0alf\xfc\x9cF\xf9 j\xa8").contains("pickle"));
    // A plausible header length is read as one, whatever follows.
    assert!(matches!(
        parse(b"\x7b\x00\x00\x00\x00\x00\x00\x00{}"),
        Err(SourceError::HeaderPastEof { declared: 123, .. })
    ));
}

/// Sub-byte dtypes whose elements do not fill whole bytes are refused, as the
/// reference safetensors library refuses them (3 F4 elements are 12 bits); whole
/// bytes of them are data like any other.
#[test]
fn sub_byte_tensors_must_fill_whole_bytes() {
    assert_eq!(
        err(
            r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
            &[0, 0]
        ),
        SourceError::PartialByte {
            tensor: "a".into(),
            dtype: "F4".into(),
            elements: 3,
            bits: 12
        }
    );
    assert!(matches!(
        err(
            r#"{"b":{"dtype":"F6_E2M3","shape":[2,3],"data_offsets":[0,5]}}"#,
            &[0; 5]
        ),
        SourceError::PartialByte { bits: 36, .. }
    ));
    let f = file(
        r#"{"a":{"dtype":"F4","shape":[2,2],"data_offsets":[0,2]},"b":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[2,5]}}"#,
        &[1, 2, 3, 4, 5],
    );
    let parsed = parse(&f).unwrap();
    assert_eq!(parsed.tensor_bytes(0), [1, 2]);
    assert_eq!(parsed.tensor_bytes(1), [3, 4, 5]);
    assert_eq!(
        err(
            r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
            &[0, 0]
        )
        .to_string(),
        "tensor \"a\": 3 elements of F4 are 12 bits, not a whole number of bytes, which \
             the safetensors format does not allow"
    );
}

#[test]
fn an_archive_is_refused_as_an_archive() {
    let mut bytes = super::super::format::MAGIC.to_vec();
    bytes.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(parse(&bytes).unwrap_err(), SourceError::BrevisArchive);
}

#[test]
fn looks_like_safetensors_reads_only_the_prefix() {
    let f = file(
        r#"  {"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
        &[7],
    );
    assert!(looks_like_safetensors(&f, f.len() as u64));
    assert!(looks_like_safetensors(&f[..11], f.len() as u64));
    assert!(
        !looks_like_safetensors(&f[..10], f.len() as u64),
        "no '{{' seen yet"
    );
    assert!(!looks_like_safetensors(&f, 9), "header past the end");
    assert!(!looks_like_safetensors(b"{\"weight_map\": {}}", 18));
    assert!(!looks_like_safetensors(&super::super::format::MAGIC, 8));
    assert!(!looks_like_safetensors(&[], 0));
}

#[test]
fn parses_entries_in_order_with_metadata() {
    let h = r#"{"b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]},"__metadata__":{"format":"pt"},"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}"#;
    let bytes = file(h, &[1, 0, 0, 0, 5, 6, 7, 8]);
    let f = parse(&bytes).unwrap();
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["b", "a"]);
    assert_eq!(f.tensors()[1].shape, Vec::<u64>::new());
    assert_eq!(f.metadata().unwrap(), &[("format".into(), "pt".into())]);
    assert_eq!(f.tensor_bytes(0), &[5, 6, 7, 8]);
    assert_eq!(
        f.regions(),
        &[
            Region::Tensor(1),
            Region::Gap { begin: 1, end: 4 },
            Region::Tensor(0)
        ]
    );
    assert!(f.warnings().iter().any(|w| matches!(
        w,
        Warning::Gap {
            begin: 1,
            end: 4,
            ..
        }
    )));
    assert_eq!(f.header(), h.as_bytes());
}

#[test]
fn refuses_duplicates_at_every_level() {
    let e = err(
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#,
        &[0, 0],
    );
    assert!(e.to_string().contains("duplicate key \"a\""), "{e}");
    let e = err(
        r#"{"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}"#,
        &[0],
    );
    assert!(e.to_string().contains("duplicate field \"dtype\""), "{e}");
    let e = err(r#"{"__metadata__":{"k":"1","k":"2"}}"#, &[]);
    assert!(matches!(e, SourceError::BadMetadata { .. }), "{e}");
}

#[test]
fn refuses_bad_json_shapes() {
    assert!(matches!(err("[]", &[]), SourceError::Json { .. }));
    assert!(matches!(err("{} {}", &[]), SourceError::Json { .. }));
    assert!(matches!(err("{}\0", &[]), SourceError::Json { .. }));
    let e = err(
        r#"{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}"#,
        &[0],
    );
    assert!(
        matches!(e, SourceError::Json { context: Some(ref k), .. } if k == "a"),
        "{e}"
    );
    let e = err(
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}"#,
        &[0],
    );
    assert!(matches!(e, SourceError::Json { .. }), "{e}");
    let e = err(r#"{"a":{"shape":[1],"data_offsets":[0,1]}}"#, &[0]);
    assert!(e.to_string().contains("missing field `dtype`"), "{e}");
    assert!(matches!(
        err(r#"{"__metadata__":{"k":1}}"#, &[]),
        SourceError::BadMetadata { .. }
    ));
    assert!(matches!(
        err(r#"{"__metadata__":[]}"#, &[]),
        SourceError::BadMetadata { .. }
    ));
}

#[test]
fn refuses_bad_lengths_without_allocating() {
    assert_eq!(parse(&[]).unwrap_err(), SourceError::TooShort { len: 0 });
    assert_eq!(parse(&[0; 8]).unwrap_err(), SourceError::HeaderLenZero);
    let mut v = (1u64 << 40).to_le_bytes().to_vec();
    v.extend_from_slice(b"{}");
    assert!(matches!(
        parse(&v).unwrap_err(),
        SourceError::HeaderPastEof { .. }
    ));
    let mut v = b"{}".to_vec();
    v.splice(0..0, 2u64.to_le_bytes());
    v[9] = 0xff;
    assert_eq!(parse(&v).unwrap_err(), SourceError::NotUtf8 { offset: 1 });
}

#[test]
fn refuses_inconsistent_entries() {
    let e = err(
        r#"{"a":{"dtype":"Q4_0","shape":[1],"data_offsets":[0,1]}}"#,
        &[0],
    );
    assert!(matches!(e, SourceError::UnknownDtype { .. }));
    let e = err(
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,0]}}"#,
        &[0],
    );
    assert!(matches!(e, SourceError::ReversedOffsets { .. }));
    let e = err(
        r#"{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#,
        &[0; 8],
    );
    assert!(
        matches!(
            e,
            SourceError::SizeMismatch {
                expected: ExpectedBytes::Overflow,
                ..
            }
        ),
        "{e}"
    );
    // No elements, but the running product overflows first (found by a tester: the
    // message said "needs more than 2^64 bytes").
    let e = err(
        r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}}"#,
        &[],
    );
    assert!(matches!(e, SourceError::ShapeOverflow { .. }), "{e}");
    assert!(e.to_string().contains("has no elements"), "{e}");
    let e = err(
        r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#,
        &[0],
    );
    assert!(matches!(e, SourceError::PastEnd { .. }));
    let e = err(
        r#"{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}}"#,
        &[0],
    );
    assert!(matches!(e, SourceError::PastEnd { .. }));
    let e = err(
        r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#,
        &[0; 2],
    );
    assert!(matches!(e, SourceError::Aliased { .. }));
    let e = err(
        r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}"#,
        &[0; 3],
    );
    assert!(matches!(e, SourceError::Overlap { .. }));
}

/// An unaligned header length is reported when there is data to misalign, and not
/// for a file of no data bytes (`{}`, found by a tester).
#[test]
fn unaligned_headers_are_reported_only_when_data_follows() {
    let bytes = file("{}", &[]);
    let empty = parse(&bytes).unwrap();
    assert!(empty.warnings().is_empty(), "{:?}", empty.warnings());
    let h = r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
    assert!(!h.len().is_multiple_of(8));
    let bytes = file(h, &[7]);
    let one = parse(&bytes).unwrap();
    assert!(
        matches!(one.warnings(), [Warning::Unaligned { header_len }] if *header_len == h.len() as u64),
        "{:?}",
        one.warnings()
    );
}

#[test]
fn allows_and_reports_unusual_layouts() {
    // Leading whitespace, unaligned length, empty tensors sharing offsets, an unknown
    // field, a trailing gap.
    let h = " {\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1},\"f\":{\"dtype\":\"BOOL\",\"shape\":[3,0],\"data_offsets\":[1,1]}}";
    let bytes = file(h, &[9, 8]);
    let f = parse(&bytes).unwrap();
    let w = f.warnings();
    assert!(w
        .iter()
        .any(|w| matches!(w, Warning::LeadingWhitespace { bytes: 1 })));
    assert!(w.iter().any(|w| matches!(w, Warning::UnknownField { .. })));
    assert!(w.iter().any(|w| matches!(
        w,
        Warning::Gap {
            begin: 1,
            end: 2,
            kind: "trailing"
        }
    )));
    assert_eq!(
        f.regions(),
        &[
            Region::Tensor(0),
            Region::Tensor(1),
            Region::Tensor(2),
            Region::Gap { begin: 1, end: 2 }
        ]
    );
}

/// An empty tensor inside bytes no tensor owns leaves them to their gap: its offset
/// moved the layout past them, and no record restored them (the writer fuzzer's first
/// find, `tests/data/fuzz/writer/crash-empty-tensor-inside-a-gap`).
#[test]
fn an_empty_tensor_inside_a_gap_leaves_the_gap_whole() {
    let h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[6,7]},\"t\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[8,8]}}";
    let bytes = file(h, &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let f = parse(&bytes).unwrap();
    assert_eq!(
        f.regions(),
        &[
            Region::Tensor(0),
            Region::Tensor(1),
            Region::Gap { begin: 2, end: 6 },
            Region::Tensor(2),
            Region::Tensor(3),
            Region::Gap { begin: 7, end: 9 }
        ]
    );
}
