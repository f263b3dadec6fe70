use super::*;
use crate::dsl::wire::Sink;
use crate::tensor::Dtype;

#[test]
fn records_round_trip() {
    let meta = TensorMeta {
        name: "w\u{1b}[31m".into(),
        header_index: 3,
        dtype: Dtype::BF16,
        shape: vec![2, 300],
        begin: 10,
        end: 1210,
        checksum: 0x0123_4567_89ab_cdef,
    };
    let mut v = Vec::new();
    write_tensor_record(&mut v, &meta, &[0x20, 5]);
    let r = read_record(&v).unwrap();
    assert_eq!(
        r,
        Record::Tensor {
            meta,
            program: v.len() - 2..v.len()
        }
    );
    // Every strict prefix is refused, and so is an extra byte.
    for n in 0..v.len() {
        assert!(read_record(&v[..n]).is_err(), "prefix {n}");
    }
    v.push(0);
    assert!(read_record(&v).is_err());

    let mut g = Vec::new();
    write_gap_record(&mut g, 4, 9, 7, &[1, 2, 3]);
    assert!(matches!(
        read_record(&g),
        Ok(Record::Gap {
            begin: 4,
            end: 9,
            checksum: 7,
            ..
        })
    ));
    let mut h = Vec::new();
    write_header_record(&mut h, 70, 8, &[]);
    assert!(matches!(
        read_record(&h),
        Ok(Record::Header {
            header_len: 70,
            checksum: 8,
            ..
        })
    ));
}

#[test]
fn index_round_trips_and_bounds_counts() {
    let idx = Index {
        tensor_count: 2,
        original_len: 1 << 40,
        file_checksum: 99,
        records_checksum: 5,
        record_lens: vec![10, 300, 1 << 33],
    };
    let mut v = Vec::new();
    write_index(&mut v, &idx);
    assert_eq!(read_index(&v).unwrap(), idx);
    let mut huge = Vec::new();
    huge.put_uleb(u64::MAX);
    huge.extend_from_slice(&[0; 20]);
    assert!(read_index(&huge).is_err());
}

#[test]
fn uleb_refuses_overflow() {
    let mut c = Cursor::new(&[0xff; 10], "t");
    assert!(c.uleb().is_err());
    let mut max = Vec::new();
    max.put_uleb(u64::MAX);
    assert_eq!(Cursor::new(&max, "t").uleb().unwrap(), u64::MAX);
}
