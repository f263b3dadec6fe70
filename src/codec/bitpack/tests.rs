use super::*;

/// `n` pseudo-random 16-bit values: the top bits of a multiplicative hash of the index.
fn hashed_u16s(n: usize) -> Vec<u64> {
    (0..n as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48)
        .collect()
}

/// The SIMD unpacking (where this processor has it) gives the scalar path's words
/// for every width it takes, every output container and lengths around its steps.
#[test]
fn simd_unpacking_equals_scalar() {
    fn check<T: Word + std::fmt::Debug + PartialEq>(data: &[u8], k: u32, n: usize) {
        let mut a = vec![T::default(); n];
        let mut b = vec![T::default(); n];
        unpack_into(data, k, &mut a);
        unpack_scalar(data, k, &mut b);
        assert_eq!(a, b, "k {k}, n {n}, {} bytes", std::mem::size_of::<T>());
    }
    let bytes: Vec<u8> = (0..4096u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
        .collect();
    for k in 1..=25u32 {
        for n in [0, 1, 15, 16, 17, 64, 333, 1024] {
            let data = &bytes[..(n * k as usize).div_ceil(8)];
            if k <= 8 {
                check::<u8>(data, k, n);
            }
            if k <= 16 {
                check::<u16>(data, k, n);
            }
            check::<u32>(data, k, n);
            check::<u64>(data, k, n);
        }
    }
}

/// The fused unpack-and-OR (where this processor has it) leaves in every output word
/// its old bits OR-ed with the field's word shifted into place, as the scalar unpacking
/// and an OR do, for every width and shift it takes and lengths around its steps.
#[test]
fn unpacking_into_words_ors_each_shifted_word() {
    fn check<T: Word + std::fmt::Debug + PartialEq>(data: &[u8], k: u32, n: usize, shift: u32) {
        let old: Vec<T> = (0..n as u64)
            .map(|i| T::from_u64(i.wrapping_mul(0x2545_F491_4F6C_DD1D) & !(mask(k) << shift)))
            .collect();
        let mut fields = vec![T::default(); n];
        unpack_scalar(data, k, &mut fields);
        let want: Vec<T> = old
            .iter()
            .zip(&fields)
            .map(|(&o, &f)| T::from_u64(o.into() | f.into() << shift))
            .collect();
        let mut got = old.clone();
        if unpack_or_into(data, k, &mut got, shift) {
            assert_eq!(
                got,
                want,
                "k {k}, shift {shift}, n {n}, {} bytes",
                std::mem::size_of::<T>()
            );
        } else {
            assert_eq!(got, old, "nothing written when no SIMD path applies");
        }
    }
    let bytes: Vec<u8> = (0..4096u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
        .collect();
    for k in 1..=25u32 {
        for n in [0, 1, 15, 16, 17, 31, 32, 33, 64, 333, 1024] {
            let data = &bytes[..(n * k as usize).div_ceil(8)];
            for shift in [0, 1, 4, 7] {
                if k + shift <= 16 {
                    check::<u16>(data, k, n, shift);
                }
            }
            for shift in [0, 3, 7, 32 - k] {
                check::<u32>(data, k, n, shift);
            }
        }
    }
}

/// Packs the field `stream` at `k` bits by the build picked at run time and by the
/// baseline build, asserts both give the body the field's own words give, and returns
/// it.
fn field_packs_as_its_words(stream: Stream<'_>, k: u32, what: &str) -> Vec<u8> {
    let (mut picked, mut baseline, mut own) = (Vec::new(), Vec::new(), Vec::new());
    encode_k_stream(stream, k, &mut picked);
    encode_k_stream_in(stream, k, &mut baseline);
    encode_k(&stream.to_words(), k, &mut own);
    let (shift, width) = match stream {
        Stream::Field { shift, width, .. } => (shift, width),
        Stream::Words(w) => (0, w.width()),
    };
    assert_eq!(picked, baseline, "{what}, field ({shift}, {width})");
    assert_eq!(picked, own, "{what}, field ({shift}, {width})");
    picked
}

#[test]
fn sign_bits_and_nibbles_of_16_bit_words_pack_as_their_words() {
    // The AVX-512 packer of 1- and 4-bit fields of 16-bit words (32 words a step) and
    // the `pext` one of the others up to 8 bits (8 a step) at every shift, on lengths
    // around their steps; the scalar packer where they do not run (9 bits, or a
    // processor without AVX-512).
    let src = hashed_u16s(1000);
    for n in [0, 1, 31, 32, 33, 64, 95, 1000] {
        let words = Words::from_fn(16, n, |i| src[i]);
        for k in 1..=9 {
            for shift in 0..=16 - k {
                let stream = Stream::Field {
                    words: &words,
                    shift,
                    width: k,
                };
                let body = field_packs_as_its_words(stream, k, &format!("n {n}"));
                assert_eq!(body.len() as u64, size_for(k, n));
            }
        }
    }
}

#[test]
fn avx2_builds_agree() {
    // The builds picked at run time (AVX2 on processors that have it, as this
    // machine's) pack and unpack as the baseline builds do, and as the field's own
    // words pack: fields of 1, 4, 3, 7, 8 and 11 bits of 16-bit and 8-bit words, over
    // more than one chunk and a partial one.
    let n = 2 * FIELD_CHUNK + 13;
    let src = hashed_u16s(n);
    for width in [16u32, 8] {
        let words = Words::from_fn(width, n, |i| src[i] & mask(width));
        for (shift, k) in [(15, 1), (0, 4), (5, 3), (8, 7), (0, 8), (4, 11)] {
            if shift + k > width {
                continue;
            }
            let stream = Stream::Field {
                words: &words,
                shift,
                width: k,
            };
            let picked = field_packs_as_its_words(stream, k, &format!("{width}-bit words"));
            let field = stream.to_words();
            let data = &picked[1..];
            assert!(unpack_buf(data, k, k, n) == unpack_buf_in(data, k, k, n));
            assert!(unpack_buf(data, k, k, n) == *field.buf());
            let equal =
                |f: &Words| crate::codec::select::buf_equals_field(f.buf(), &words, 0, shift, k);
            assert!(equal(&field));
            let mut v = field.to_u64s();
            v[n - 1] ^= 1;
            assert!(!equal(&Words::from_u64s(k, &v)));
        }
    }
}

/// Packing at every width from 1 to 64 (the constant-shift groups of 1 to 32 bits,
/// whole bytes, the bit writer above) gives the bits a plain LSB-first bit writer
/// gives, for every container and count of words around a group of eight; and a
/// field of 32-bit words (an F32 mantissa of 19 to 23 bits, its sign, its exponent
/// with mantissa bits) packs as its own words do.
#[test]
fn every_width_packs_as_the_bit_writer() {
    let src = hashed_u16s(2 * FIELD_CHUNK + 77);
    let wide = |i: usize| {
        (src[i] << 48) ^ (src[(i * 7 + 3) % src.len()] << 24) ^ src[(i * 13 + 5) % src.len()]
    };
    for k in 1..=64u32 {
        for n in [0, 1, 7, 8, 9, 63, 64, 65, 1001] {
            let values: Vec<u64> = (0..n).map(|i| wide(i) & mask(k)).collect();
            let mut w = BitWriter::new();
            for &x in &values {
                w.write(x, k);
            }
            let want = w.finish();
            for width in [k, k.next_power_of_two().max(8)] {
                if width > 64 {
                    continue;
                }
                let words = Words::from_u64s(width, &values);
                let mut got = Vec::new();
                encode_k(&words, k, &mut got);
                assert_eq!(got[0], k as u8);
                assert_eq!(&got[1..], &want[..], "k {k}, {n} words of {width} bits");
            }
        }
    }
    let n = src.len();
    let words = Words::from_fn(32, n, |i| wide(i) & mask(32));
    for (shift, k) in [
        (0, 19),
        (0, 20),
        (0, 23),
        (3, 24),
        (31, 1),
        (19, 12),
        (0, 32),
    ] {
        let stream = Stream::Field {
            words: &words,
            shift,
            width: k,
        };
        field_packs_as_its_words(stream, k, "32-bit words");
    }
}

fn body(values: &[u64], width: u32) -> Vec<u8> {
    let words = Words::from_u64s(width, values);
    let mut out = Vec::new();
    encode(&words, &mut out);
    assert_eq!(size(&words), out.len() as u64);
    assert_eq!(decode(&out, width, values.len()).unwrap(), words);
    out
}

#[test]
fn exact_bodies() {
    assert_eq!(body(&[1, 2, 3], 8), vec![2, 0b0011_1001]);
    assert_eq!(body(&[0, 0, 0], 8), vec![0]);
    assert_eq!(body(&[], 8), vec![0]);
    assert_eq!(body(&[5, 0x1FF], 9), vec![9, 0x05, 0xFE, 0x03]);
    assert_eq!(body(&[0xABCD], 16), vec![16, 0xCD, 0xAB]);
    assert_eq!(body(&[u64::MAX], 64), [vec![64], vec![0xFF; 8]].concat());
    let mut w = vec![63u8];
    w.extend_from_slice(&(u64::MAX >> 1).to_le_bytes());
    assert_eq!(body(&[u64::MAX >> 1], 64), w);
    body(&[1, (1 << 60) - 1, 7, 1 << 59], 61);
}

/// Widths 1, 2 and 4 take the byte-wise unpacking path: words come out of each byte
/// lowest bits first, whole groups and the tail alike, in 8- and 16-bit containers.
#[test]
fn sub_byte_widths_unpack_lowest_bits_first() {
    assert_eq!(
        body(&[1, 0, 1, 1, 0, 0, 0, 1, 1], 1),
        vec![1, 0b1000_1101, 0b1]
    );
    assert_eq!(body(&[3, 0, 2, 1, 1], 2), vec![2, 0b0110_0011, 0b01]);
    assert_eq!(
        body(&[0xA, 0x5, 0xF, 0x0, 0x1, 0x2, 0x3, 0x4, 0x9], 4)[..6],
        [4, 0x5A, 0x0F, 0x21, 0x43, 0x09]
    );
    // One-bit words in bytes take the multiply path: the same bytes as the
    // generic packer, for every length around the group size.
    for n in (0..40).chain([1001]) {
        let v: Vec<u8> = (0..n)
            .map(|i| ((i * 2_654_435_761u64) >> 13) as u8 & 1)
            .collect();
        let (mut fast, mut generic) = (Vec::new(), Vec::new());
        pack_bits_u8(&v, &mut fast);
        pack(&v, 1, &mut generic);
        assert_eq!(fast, generic, "n {n}");
        // And back, by the multiply path and the generic one.
        assert_eq!(unpack_bits_u8(&fast, v.len()), v, "n {n}");
        assert_eq!(unpack::<u8>(&fast, 1, v.len()), v, "n {n}");
        // Nibbles in bytes take the fold path, with the same bytes both ways.
        let v: Vec<u8> = (0..n)
            .map(|i| ((i * 2_654_435_761u64) >> 11) as u8 & 0xF)
            .collect();
        let (mut fast, mut generic) = (Vec::new(), Vec::new());
        pack_nibbles_u8(&v, &mut fast);
        pack(&v, 4, &mut generic);
        assert_eq!(fast, generic, "n {n}");
        assert_eq!(unpack_nibbles_u8(&fast, v.len()), v, "n {n}");
        assert_eq!(unpack::<u8>(&fast, 4, v.len()), v, "n {n}");
    }
    for (k, width) in [(1, 1), (2, 2), (4, 4), (1, 12), (2, 16), (4, 9)] {
        for n in [0, 1, 7, 8, 9, 63, 64, 1001] {
            // The first word uses all k bits, so the body packs at exactly k.
            let v: Vec<u64> = (0..n as u64)
                .map(|i| (((i * 2_654_435_761) >> 7) | (u64::from(i == 0) * 15)) & ((1 << k) - 1))
                .collect();
            let b = body(&v, width);
            let want = if n == 0 { 0 } else { k };
            assert_eq!(b[0], want, "k for width {width}, n {n}");
        }
    }
}

#[test]
fn hostile_bodies() {
    assert!(matches!(
        decode(&[], 8, 0),
        Err(CodecError::Truncated { .. })
    ));
    assert!(matches!(
        decode(&[9], 8, 0),
        Err(CodecError::Invalid { .. })
    ));
    assert!(matches!(
        decode(&[2, 0], 8, 5),
        Err(CodecError::Truncated { .. })
    ));
    assert!(matches!(
        decode(&[2, 0, 0], 8, 3),
        Err(CodecError::TrailingBytes { .. })
    ));
    // [1, 2, 3] at k = 2 uses 6 bits: the top two bits of the byte must be zero.
    assert!(matches!(
        decode(&[2, 0b0111_1001], 8, 3),
        Err(CodecError::Invalid { .. })
    ));
    // A non-minimal k is valid.
    assert_eq!(decode(&[3, 0b1], 8, 2).unwrap().to_u64s(), vec![1, 0]);
    // n * k overflowing is a size mismatch, not a panic.
    assert!(decode(&[64, 0], 64, usize::MAX).is_err());
}

/// The chunked check agrees with decoding then comparing: fields of 1, 3, 4 and 7
/// bits (the sign and nibble fast paths and the general unpacking) of 16-bit words
/// over three chunks and a partial one; a changed field bit in the first word, at
/// either side of a chunk boundary and in the last word fails it, a change outside
/// the field does not; a bad body is the decoder's error; a width-0 body checks a
/// zero field only.
#[test]
fn chunked_check_agrees_with_decode() {
    let n = 3 * CHECK_WORDS + 5;
    let src = hashed_u16s(n);
    let words = Words::from_u64s(16, &src);
    for (shift, k) in [(15, 1), (0, 4), (5, 3), (8, 7)] {
        let field = Words::from_fn(k, n, |i| (src[i] >> shift) & ((1 << k) - 1));
        let mut b = Vec::new();
        encode_k(&field, k, &mut b);
        assert!(matches_field(&b, &words, shift, k).unwrap(), "k {k}");
        for at in [0, CHECK_WORDS - 1, CHECK_WORDS, n - 1] {
            let mut v = src.clone();
            v[at] ^= 1 << shift;
            let other = Words::from_u64s(16, &v);
            assert!(
                !matches_field(&b, &other, shift, k).unwrap(),
                "k {k} at {at}"
            );
            let outside = if shift == 0 { 1 << 15 } else { 1 };
            v[at] ^= (1 << shift) | outside;
            let other = Words::from_u64s(16, &v);
            assert!(
                matches_field(&b, &other, shift, k).unwrap(),
                "k {k} at {at}"
            );
        }
        assert_eq!(
            matches_field(&b[..b.len() - 1], &words, shift, k),
            Err(decode(&b[..b.len() - 1], k, n).unwrap_err())
        );
    }
    let zero = Words::from_fn(16, n, |i| (i as u64 % 7) << 4);
    assert!(matches_field(&[0], &zero, 0, 4).unwrap());
    assert!(!matches_field(&[0], &zero, 4, 3).unwrap());
}
