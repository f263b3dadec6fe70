use super::*;
use crate::tensor::mask;

fn round_trip(words: &Words) -> Vec<u8> {
    let mut body = Vec::new();
    encode(words, &mut body).expect("non-empty");
    let back = decode(&body, words.width(), words.len()).expect("decodes");
    assert_eq!(&back, words);
    body
}

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

#[test]
fn round_trips_of_every_shape() {
    let mut seed = 7u64;
    for &(width, n, spread) in &[
        (8u32, 1usize, 4u64),
        (8, 31, 4),
        (8, 32, 4),
        (8, 33, 200),
        (8, 5000, 256),
        (11, 100_000, 300),
        (16, 70_000, 2000),
        (32, 9000, 700),
        (1, 1000, 2),
        (64, 4096, 3),
    ] {
        let words = Words::from_fn(width, n, |_| {
            // Geometric-ish: small values common, a tail of rare ones.
            let r = lcg(&mut seed);
            let v = (r % spread) * (r % 3) / 2 % spread;
            v & mask(width)
        });
        round_trip(&words);
    }
}

/// The SIMD encoder (where this processor has it) writes the scalar encoder's bytes:
/// 32 and 64 states, every precision, skewed and flat symbol counts, lengths around
/// whole groups.
#[test]
fn simd_decoder_equals_scalar() {
    // Streams of 8- and 16-bit words (the SIMD maps), 32 and 64 states, escapes,
    // lengths around a group and a block; each body whole and damaged (cut, a byte
    // flipped in its payload): the same words or an error from both paths.
    let mut seed = 5u64;
    // `few` of 40 spaces the common words over 120 values (a table of offsets), of 90
    // over 270 (a table of symbols).
    for (width, few) in [
        (8u32, 40),
        (11, 40),
        (16, 40),
        (20, 40),
        (1, 2),
        (8, 3),
        (11, 90),
        (20, 90),
    ] {
        for n in [1usize, 63, 64, 65, 2048, 5000, 1 << 18] {
            let words = Words::from_fn(width, n, |_| {
                let r = lcg(&mut seed);
                // Mostly a few values, some rare ones (escaped), or (`few` of 2 and 3)
                // one value more than half the time: a frequency above half the
                // table, whose states reach 2^31 and more in the decoder.
                if r.is_multiple_of(97) && few > 3 {
                    r >> 8
                } else if r.is_multiple_of(3) || few > 3 {
                    (r >> 3) % few * 3
                } else {
                    0
                }
            });
            let mut body = Vec::new();
            encode(&words, &mut body).unwrap();
            let simd = decode(&body, width, n).unwrap();
            assert_eq!(simd, words, "width {width}, n {n}");
            assert_eq!(decode_scalar(&body, width, n).unwrap(), words);
            if let Some(avx2) = decode_avx2(&body, width, n) {
                assert_eq!(avx2.unwrap(), words, "AVX2: width {width}, n {n}");
            }
            if let Some(avx2) = decode_avx2_lookup(&body, width, n) {
                assert_eq!(avx2.unwrap(), words, "AVX2 lookup: width {width}, n {n}");
            }
            for damage in 0..6 {
                let mut bad = body.clone();
                let at = (lcg(&mut seed) as usize) % bad.len();
                if damage % 2 == 0 {
                    bad.truncate(at.max(1));
                } else {
                    bad[at] ^= 1 << (lcg(&mut seed) % 8);
                }
                let (a, b) = (decode(&bad, width, n), decode_scalar(&bad, width, n));
                for c in [
                    decode_avx2(&bad, width, n),
                    decode_avx2_lookup(&bad, width, n),
                ]
                .into_iter()
                .flatten()
                {
                    assert_eq!(c.is_ok(), b.is_ok(), "AVX2: width {width}, n {n}");
                    if let (Ok(c), Ok(b)) = (c, &b) {
                        assert_eq!(c, *b, "AVX2: width {width}, n {n}, damage {damage}");
                    }
                }
                assert_eq!(
                    a.is_ok(),
                    b.is_ok(),
                    "width {width}, n {n}, damage {damage}"
                );
                if let (Ok(a), Ok(b)) = (a, b) {
                    assert_eq!(a, b, "width {width}, n {n}, damage {damage}");
                }
            }
        }
    }
}

/// The one-pass field encoder writes the two-pass encoder's bytes: fields of 8-, 16-
/// and 32-bit words from 1 to 12 bits, with and without escapes, 32 and 64 states,
/// lengths around a group, and whole words.
/// Asserts that `plan` codes `stream` (whose words are `field`) to the same body in one
/// pass with each SIMD build as in two passes, and that the SIMD and scalar decoders
/// give `field` back.
fn fused_and_two_passes_agree(plan: &Plan, stream: Stream<'_>, field: &Words, what: &str) {
    let (width, n) = (stream.width(), stream.len());
    let mut b = vec![9u8];
    plan.encode_with(stream, &mut b, None);
    for isa in [simd::Isa::Best, simd::Isa::Avx2] {
        let mut a = vec![9u8];
        plan.encode_with(stream, &mut a, Some(isa));
        let what = format!("{isa:?}: {what}");
        assert_eq!(a, b, "{what}");
        assert_eq!(decode(&a[1..], width, n).expect(&what), *field, "{what}");
        assert_eq!(
            decode_scalar(&a[1..], width, n).expect(&what),
            *field,
            "{what}"
        );
    }
}

#[test]
fn fused_encoder_equals_two_passes() {
    let mut seed = 5u64;
    // The precisions planned: the SIMD steps divide in single precision from
    // `simd::DIV_SCALE` up and by gathered reciprocals below it; both must be seen.
    let mut scales = std::collections::BTreeSet::new();
    for (container, shift, width) in [
        (8u32, 0u32, 8u32),
        (8, 2, 5),
        (16, 7, 9),
        (16, 3, 12),
        (16, 0, 16),
        (32, 19, 12),
        (32, 23, 8),
        (32, 0, 1),
    ] {
        for n in [31usize, 64, 65, 1000, 4096 + 33, WIDE_WORDS + 5] {
            for spread in [3u64, 40, 300, 5000] {
                // A few common fields and rare ones (escaped when there are many).
                let words = Words::from_fn(container, n, |_| {
                    let r = lcg(&mut seed);
                    let f = if r.is_multiple_of(16) {
                        r / 16 % spread
                    } else {
                        r / 16 % 3
                    };
                    let other = lcg(&mut seed) & mask(container);
                    let m = mask(width) << shift;
                    (other & !m) | ((f & mask(width)) << shift)
                });
                let stream = Stream::Field {
                    words: &words,
                    shift,
                    width,
                };
                let field = stream.to_words();
                let hist = crate::stats::histogram(&field, usize::MAX).unwrap();
                let plan = Plan::new(&hist, width, n).unwrap();
                if plan.symbols() >= 2 {
                    scales.insert(plan.scale);
                }
                let what = format!(
                    "{container}-bit words, field ({shift}, {width}), n {n}, spread {spread}"
                );
                fused_and_two_passes_agree(&plan, stream, &field, &what);
                // Open plans: from every fourth block of 512 words (rare words the
                // sample misses are escaped) and from the whole stream (no word is
                // escaped but the first, which the table's escape needs).
                let quarter: Vec<u64> = (0..n)
                    .filter(|i| (i / 512) % 4 == 0)
                    .map(|i| field.get(i))
                    .collect();
                let quarter = Words::from_u64s(width, &quarter);
                for sample in [&quarter, &*field] {
                    let hist = crate::stats::histogram(sample, usize::MAX).unwrap();
                    let Some(plan) = Plan::from_sample(&hist, sample.len(), width, n, u64::MAX)
                    else {
                        panic!("no open plan");
                    };
                    let what = format!("open plan of {} words, {what}", sample.len());
                    fused_and_two_passes_agree(&plan, stream, &field, &what);
                }
            }
        }
    }
    assert!(
        scales.iter().any(|&s| s < simd::DIV_SCALE) && scales.iter().any(|&s| s >= simd::DIV_SCALE),
        "precisions planned: {scales:?}"
    );
}

#[test]
fn an_open_plan_escapes_the_first_word_when_no_other_is() {
    // 1,000 words of three values, planned from their own histogram as a sample: the
    // table declares an escape, so the first word (5) is coded as it.
    let words = Words::from_fn(8, 1000, |i| [5, 9, 200][i % 3]);
    let hist = crate::stats::histogram(&words, usize::MAX).unwrap();
    let plan = Plan::from_sample(&hist, 1000, 8, 1000, u64::MAX).unwrap();
    assert_eq!(
        (plan.syms.clone(), plan.escaped, plan.symbols()),
        (vec![5, 9, 200], 1, 4)
    );
    for fused in [None, Some(simd::Isa::Best)] {
        let mut body = Vec::new();
        plan.encode_with(Stream::Words(&words), &mut body, fused);
        let p = parse(&body, 8, 1000).unwrap();
        assert!(p.has_escape);
        assert_eq!(p.escaped, Words::from_u64s(8, &[5]));
        assert_eq!(decode(&body, 8, 1000).unwrap(), words);
    }
    // A sample that misses 77: its two words are escaped, and the first is not.
    let with_rare = Words::from_fn(8, 1000, |i| match i {
        400 | 900 => 77,
        _ => [5, 9, 200][i % 3],
    });
    let mut body = Vec::new();
    plan.encode(Stream::Words(&with_rare), &mut body);
    assert_eq!(
        parse(&body, 8, 1000).unwrap().escaped,
        Words::from_u64s(8, &[77, 77])
    );
    assert_eq!(decode(&body, 8, 1000).unwrap(), with_rare);
}

#[test]
fn simd_encoder_equals_scalar() {
    let mut seed = 11u64;
    for (lanes, n) in [
        (32usize, 31usize),
        (32, 32),
        (32, 1000),
        (64, 64),
        (64, 70_001),
    ] {
        for scale in [1u32, 5, 8, 9, 10, 12] {
            for k in [2usize, 3, 17, 256] {
                let k = k.min(1 << scale);
                // Frequencies summing to 2^scale, each at least 1, the first largest.
                let mut freqs = vec![1u32; k];
                freqs[0] += (1 << scale) - k as u32;
                let symbols: Vec<u8> = (0..n)
                    .map(|_| {
                        let r = lcg(&mut seed) as usize;
                        (if r.is_multiple_of(4) { r / 4 % k } else { 0 }) as u8
                    })
                    .collect();
                let mut b = Vec::new();
                encode_payload_with(&symbols, &freqs, scale, lanes, &mut b, None);
                for isa in [simd::Isa::Best, simd::Isa::Avx2] {
                    let mut a = Vec::new();
                    encode_payload_with(&symbols, &freqs, scale, lanes, &mut a, Some(isa));
                    assert_eq!(
                        a, b,
                        "{isa:?}: lanes {lanes}, n {n}, scale {scale}, {k} symbols"
                    );
                }
            }
        }
    }
}

#[test]
fn a_constant_stream_is_its_table() {
    let words = Words::filled(16, 0x3f80, 10_000);
    let body = round_trip(&words);
    // Escape bit, count, the word in 16 bits: 25 bits.
    assert_eq!(body.len(), 4);
}

#[test]
fn more_than_256_words_are_escaped() {
    let mut seed = 1u64;
    let words = Words::from_fn(16, 50_000, |i| {
        if i % 50 == 0 {
            1000 + lcg(&mut seed) % 5000
        } else {
            lcg(&mut seed) % 100
        }
    });
    let body = round_trip(&words);
    assert_eq!(body[0] & 1, 1, "an escape");
}

#[test]
fn damage_is_refused_or_decodes_to_other_words() {
    let mut seed = 3u64;
    let words = Words::from_fn(8, 20_000, |_| lcg(&mut seed) % 40);
    let body = round_trip(&words);
    for at in (0..body.len()).step_by(7) {
        let mut b = body.clone();
        b[at] ^= 0x24;
        if let Ok(w) = decode(&b, 8, words.len()) {
            assert_eq!(w.len(), words.len());
        }
    }
    for cut in [0, 1, body.len() / 2, body.len() - 1] {
        assert!(decode(&body[..cut], 8, words.len()).is_err());
    }
    assert!(decode(&body, 8, words.len() - 1).is_err());
}

/// The AVX2 encoder's single-precision quotient is within one of `floor(y / f)` (which
/// its correction step needs) for every frequency at every precision it is used at, on
/// the states where rounding bites: the largest below the renormalization bound, those
/// around multiples of `f`, and spread ones.
#[test]
fn single_precision_quotients_are_within_one() {
    let mut seed = 3u64;
    for scale in simd::DIV_SCALE..=MAX_SCALE_BITS {
        for f in 1..(1u32 << scale) {
            let bound = u64::from(f) << (32 - scale);
            let mut ys: Vec<u64> =
                vec![0, 1, bound - 1, bound - 2, bound / 2, bound - u64::from(f)];
            for _ in 0..8 {
                let q = lcg(&mut seed) % (bound / u64::from(f)).max(1);
                let y = q * u64::from(f);
                ys.extend([y, y + u64::from(f) - 1, y.saturating_sub(1)]);
                ys.push(lcg(&mut seed) % bound);
            }
            for y in ys.into_iter().filter(|&y| y < bound) {
                let y = y as u32;
                let q = i64::from(y / f);
                let guess = simd::single_precision_quotient(y, f);
                assert!(
                    (guess - q).abs() <= 1,
                    "scale {scale}, f {f}, y {y}: {guess} for {q}"
                );
            }
        }
    }
}

/// A table of offsets ([`Decoder::offset`]) is made exactly when the coded words span
/// fewer than 256 values with byte 255 left for the escape, and its decoder writes the
/// words a table of symbols does: every container, shifted as a `merge` field, with and
/// without escapes, in blocks.
#[test]
fn offset_tables_decode_like_symbol_tables() {
    let mut seed = 11u64;
    // (width, base, span of the common words, whether rare words far off are mixed in,
    // whether offsets apply).
    for (width, base, span, rare, offsets) in [
        (8u32, 0u64, 200u64, false, true),
        (8, 1, 255, false, true),
        (11, 832, 192, true, true),
        (11, 800, 254, true, true),
        (11, 800, 255, true, true),
        (11, 800, 256, false, false),
        (16, 60_000, 100, true, true),
        (20, 5, 400, false, false),
        (32, 1 << 31, 30, true, true),
        (64, u64::MAX - 300, 250, false, true),
    ] {
        let n = 20_000;
        let words = Words::from_fn(width, n, |i| {
            let r = lcg(&mut seed);
            if rare && r.is_multiple_of(400) {
                // Mostly distinct: escaped, not coded.
                mask(width) - (r >> 8) % (mask(width) / 4).min(100_000)
            } else if i % 500 == 0 {
                base + span - 1
            } else {
                base + (r % span) * (r % 5) / 4
            }
        });
        let mut body = Vec::new();
        encode(&words, &mut body).unwrap();
        let parsed = || parse(&body, width, n).unwrap();
        assert_eq!(parsed().has_escape, rare, "{width} {span}");
        assert_eq!(
            parsed().decoder().unwrap().offset.is_some(),
            offsets,
            "{width} {span}"
        );
        assert!(parsed().decoder_by_symbol().unwrap().offset.is_none());
        for shift in [0, 3, 8, 16, 40] {
            fn run<T: crate::codec::table::Word>(
                d: &mut Decoder<'_>,
                shift: u32,
                n: usize,
            ) -> Vec<T> {
                d.set_shift(shift);
                let mut out = vec![T::default(); n];
                for block in out.chunks_mut(4096) {
                    d.next(block).unwrap();
                }
                out
            }
            let (mut a, mut b) = (
                parsed().decoder().unwrap(),
                parsed().decoder_by_symbol().unwrap(),
            );
            match container_bytes(width) {
                1 => assert_eq!(run::<u8>(&mut a, shift, n), run::<u8>(&mut b, shift, n)),
                2 => assert_eq!(run::<u16>(&mut a, shift, n), run::<u16>(&mut b, shift, n)),
                4 => assert_eq!(run::<u32>(&mut a, shift, n), run::<u32>(&mut b, shift, n)),
                _ => assert_eq!(run::<u64>(&mut a, shift, n), run::<u64>(&mut b, shift, n)),
            }
        }
        assert_eq!(decode(&body, width, n).unwrap(), words);
    }
}

/// Both AVX2 kernels (gathers, scalar loads) step arbitrary states over arbitrary
/// payload words exactly as the scalar step does: the same symbols, final states and
/// words read, for 32 and 64 states and every precision from 2 to 12 bits (tables of
/// random frequencies, payload words not from an encoder, states anywhere in
/// `[2^16, 2^32)`).
#[test]
fn avx2_kernels_step_like_the_scalar_step() {
    let kernels = [simd::avx2(), simd::avx2_lookup()];
    if kernels.iter().any(Option::is_none) {
        return; // no AVX2: nothing to compare
    }
    let mut seed = 7u64;
    for scale in 2..=12u32 {
        for lanes in [32usize, 64] {
            // Frequencies of 2..=64 symbols summing to 2^scale, each at least 1.
            let m = 1u32 << scale;
            let k = (2 + lcg(&mut seed) as u32 % 63).min(m);
            let mut freqs = vec![1u32; k as usize];
            for _ in 0..m - k {
                freqs[(lcg(&mut seed) % u64::from(k)) as usize] += 1;
            }
            let mut table = Vec::with_capacity(m as usize);
            for (s, &f) in freqs.iter().enumerate() {
                table.extend((0..f).map(|b| entry(s as u32, f, b)));
            }
            let groups = 1 + lcg(&mut seed) as usize % 40;
            let n = groups * lanes;
            let words: Vec<u8> = (0..2 * n).map(|_| lcg(&mut seed) as u8).collect();
            let x0: Vec<u32> = (0..lanes)
                .map(|_| L + (lcg(&mut seed) as u32).wrapping_mul(2654435761) % (u32::MAX - L))
                .collect();
            // The scalar step of `Decoder::decode_symbols`.
            let (mut x, mut pos, mut want) = (x0.clone(), 0usize, vec![0u8; n]);
            for (i, o) in want.iter_mut().enumerate() {
                let lane = i % lanes;
                let e = table[(x[lane] & (m - 1)) as usize];
                *o = e as u8;
                let mut y = ((e >> 8) & 0xfff) * (x[lane] >> scale) + (e >> 20);
                if y < L {
                    y = y << 16
                        | u32::from(u16::from_le_bytes([words[2 * pos], words[2 * pos + 1]]));
                    pos += 1;
                }
                x[lane] = y;
            }
            for kernel in kernels.iter().flatten() {
                let (mut xk, mut out) = (x0.clone(), vec![0u8; n]);
                let p = kernel(&table, scale, &mut xk, &words, 0, &mut out);
                assert_eq!(out, want, "scale {scale}, {lanes} states");
                assert_eq!(xk, x, "scale {scale}, {lanes} states");
                assert_eq!(p, pos, "scale {scale}, {lanes} states");
            }
        }
    }
}
