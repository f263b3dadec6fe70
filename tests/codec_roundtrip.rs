//! Property tests of the literal codecs: every codec round-trips every stream of every
//! width, `all_sizes` is exact, `encode_best` keeps the smallest body with the tie rule,
//! and no decoder panics on truncated, extended, flipped or random bodies.

use brevis::codec::{self, all_sizes, encode_best, rans, select, CodecId, ALL_CODECS};
use brevis::stats::histogram;
use brevis::tensor::mask;
use brevis::Words;
use proptest::prelude::*;

/// Streams of a width: arbitrary words, small skewed alphabets, constants, values near
/// `2^b - 1`, and runs of consecutive values.
fn stream() -> impl Strategy<Value = Words> {
    (1u32..=64).prop_flat_map(|width| {
        let m = mask(width);
        let arbitrary = prop::collection::vec(any::<u64>(), 0..300)
            .prop_map(move |v| Words::from_u64s(width, &v))
            .boxed();
        let alphabet = (
            prop::collection::vec(any::<u64>(), 1..40),
            prop::collection::vec(any::<u16>(), 0..2000),
        )
            .prop_map(move |(syms, picks)| {
                // Index by the square root of a uniform pick: a skewed distribution.
                let v: Vec<u64> = picks
                    .iter()
                    .map(|&p| {
                        let i = ((f64::from(p) / 65_536.0).powi(3) * syms.len() as f64) as usize;
                        syms[i.min(syms.len() - 1)]
                    })
                    .collect();
                Words::from_u64s(width, &v)
            })
            .boxed();
        let constant = (any::<u64>(), 0usize..500)
            .prop_map(move |(x, n)| Words::filled(width, x, n))
            .boxed();
        let near_max = prop::collection::vec(0u64..4, 0..300)
            .prop_map(move |v| Words::from_fn(width, v.len(), |i| m - v[i].min(m)))
            .boxed();
        let runs = (any::<u64>(), 1usize..700, 1u64..300)
            .prop_map(move |(base, n, span)| {
                Words::from_fn(width, n, |i| base.wrapping_add(i as u64 * 7 % span))
            })
            .boxed();
        prop_oneof![arbitrary, alphabet, constant, near_max, runs]
    })
}

fn check_stream(words: &Words) {
    let (width, n) = (words.width(), words.len());
    let sizes = all_sizes(words);
    // `sizes` is in `ALL_CODECS` order (not by tag: `rans8` is tag 6, `bucket` 5).
    for (i, codec) in ALL_CODECS.into_iter().enumerate() {
        let enc = select::encode_with(codec, words);
        match sizes[i] {
            Some(size) => assert_eq!(
                enc.as_ref().map(|e| e.body.len() as u64),
                Some(size),
                "{codec:?} size for {words:?}"
            ),
            // Not sized: a table codec past its distinct words (no body either), or a
            // rANS coder not written at this length (`rans32` at none since `rans8`,
            // `rans8` below the wide layout's length, `rans` at and above it), which
            // still encodes and must round trip.
            None => assert!(
                enc.is_none() || matches!(codec, CodecId::Rans | CodecId::Rans32 | CodecId::Rans8),
                "{codec:?} encodes {words:?} but is not sized"
            ),
        }
        let Some(enc) = enc else { continue };
        let back = codec::decode(codec, &enc.body, width, n)
            .unwrap_or_else(|e| panic!("{codec:?} failed on its own body: {e}"));
        assert_eq!(&back, words, "{codec:?} round trip");
        assert!(select::table_len(codec, &enc.body, width, n) <= enc.body.len() as u64);
        // Every strict prefix (sampled in the middle of long bodies) and any extra byte
        // are refused.
        let len = enc.body.len();
        let cuts = (0..len).filter(|&c| c < 40 || c + 40 >= len || c % (len / 50 + 1) == 0);
        for cut in cuts {
            assert!(codec::decode(codec, &enc.body[..cut], width, n).is_err());
        }
        let mut longer = enc.body.clone();
        longer.push(0);
        assert!(
            codec::decode(codec, &longer, width, n).is_err(),
            "{codec:?} trailing"
        );
    }
    let min = sizes.iter().flatten().min().copied().unwrap();
    let first = ALL_CODECS
        .into_iter()
        .zip(sizes)
        .find(|&(_, s)| s == Some(min))
        .unwrap()
        .0;
    let best = encode_best(words);
    assert_eq!(
        (best.codec, best.body.len() as u64),
        (first, min),
        "{sizes:?}"
    );
    assert_eq!(
        &codec::decode(best.codec, &best.body, width, n).unwrap(),
        words
    );
    if let Some(hist) = histogram(words, codec::MAX_TABLE_SYMBOLS) {
        let plan = rans::Plan::new(&hist, width, n);
        assert_eq!(plan.codec(), rans::Layout::for_len(n).codec());
        let body = select::encode_with(plan.codec(), words).unwrap().body;
        assert!(plan.lower_bound() <= body.len() as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn every_codec_round_trips(words in stream()) {
        check_stream(&words);
    }

    #[test]
    fn flipped_bytes_never_panic(words in stream(), flips in prop::collection::vec((any::<usize>(), 1u8..=255), 1..4)) {
        let (width, n) = (words.width(), words.len());
        for codec in ALL_CODECS {
            let Some(enc) = select::encode_with(codec, &words) else { continue };
            if enc.body.is_empty() {
                continue;
            }
            let mut bad = enc.body.clone();
            for &(at, x) in &flips {
                let i = at % bad.len();
                bad[i] ^= x;
            }
            if let Ok(w) = codec::decode(codec, &bad, width, n) {
                prop_assert_eq!((w.width(), w.len()), (width, n));
            }
        }
    }

    #[test]
    fn random_bodies_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..64),
        width in 1u32..=64,
        n in prop_oneof![0usize..100, Just(1usize << 20), Just(usize::MAX)],
    ) {
        for codec in ALL_CODECS {
            if let Ok(w) = codec::decode(codec, &body, width, n) {
                prop_assert_eq!((w.width(), w.len()), (width, n));
            }
        }
    }
}

/// A context stream of F32-like words for `n` words from position 3: exponents from
/// `seed`'s bytes.
fn context_words(n: usize, seed: u64) -> Words {
    Words::from_fn(32, n + 3, |i| {
        let e = (seed.rotate_left(i as u32 % 64) & 0xff) | 0x70;
        (e << 23) | ((i as u64 * 2_654_435_761) & 0x7f_ffff)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The bucket codec round-trips every stream, plain or ZigZag, with and without a
    /// context; a body with the context flag is refused without its context; every
    /// strict prefix and an extra byte are refused; flipped bytes never panic.
    #[test]
    fn bucket_round_trips_and_refuses_damage(
        words in stream(),
        seed in any::<u64>(),
        flips in prop::collection::vec((any::<usize>(), 1u8..=255), 1..4),
    ) {
        use codec::bucket::{self, Context, Field, Params};
        let (width, n) = (words.width(), words.len());
        let ctx_words = context_words(n, seed);
        let ctx = Context { words: &ctx_words, start: 3 };
        let field = Field { shift: 23, width: 8 };
        for zigzag in [false, true] {
            for with_ctx in [false, true] {
                let params = Params { zigzag, context: with_ctx.then_some((ctx, field)) };
                let body = bucket::encode(&words, params);
                let back = codec::select::decode_in(CodecId::Bucket, &body, width, n, Some(ctx));
                prop_assert_eq!(back.as_ref(), Ok(&words));
                prop_assert!(select::table_len(CodecId::Bucket, &body, width, n) <= body.len() as u64);
                let alone = codec::decode(CodecId::Bucket, &body, width, n);
                prop_assert_eq!(alone.is_ok(), !with_ctx);
                for cut in (0..body.len()).filter(|&c| c < 40 || c + 40 >= body.len()) {
                    prop_assert!(bucket::decode(&body[..cut], width, n, Some(ctx)).is_err());
                }
                let mut longer = body.clone();
                longer.push(0);
                prop_assert!(bucket::decode(&longer, width, n, Some(ctx)).is_err());
                let mut bad = body.clone();
                for &(at, x) in &flips {
                    let i = at % bad.len();
                    bad[i] ^= x;
                }
                if let Ok(w) = bucket::decode(&bad, width, n, Some(ctx)) {
                    prop_assert_eq!((w.width(), w.len()), (width, n));
                }
            }
        }
    }
}

#[test]
fn every_bit_pattern_of_small_widths() {
    for width in 1..=12u32 {
        let all = Words::from_fn(width, 1 << width, |i| i as u64);
        check_stream(&all);
        let twice = Words::from_fn(width, 2 << width, |i| {
            (i as u64).reverse_bits() >> (64 - width - 1)
        });
        check_stream(&twice);
    }
    // Every 16-bit value: 65,536 symbols, the most a table may hold.
    let all16 = Words::from_fn(16, 1 << 16, |i| (i as u64 * 40_503) & 0xFFFF);
    check_stream(&all16);
    // One more distinct word than a table allows.
    let wide = Words::from_fn(32, 65_537, |i| i as u64 * 3);
    assert_eq!(all_sizes(&wide)[2..], [None, None, None, None]);
    check_stream(&wide);
}

#[test]
fn huge_claims_are_refused_before_allocating() {
    // Huffman with m >= 2 needs a bit per word: 2^40 words in 10 bytes is refused.
    let w = Words::from_u64s(8, &[1, 2, 1, 2]);
    let h = select::encode_with(CodecId::Huffman, &w).unwrap();
    assert!(codec::decode(CodecId::Huffman, &h.body, 8, 1 << 40).is_err());
    // Bit packing and raw compare sizes first.
    assert!(codec::decode(CodecId::BitPack, &[8; 10], 8, 1 << 40).is_err());
    assert!(codec::decode(CodecId::Raw, &[8; 10], 8, 1 << 40).is_err());
    // Buckets decode their symbols first (Huffman here, refused as above).
    let mut b = vec![0, 2, CodecId::Huffman as u8];
    b.extend_from_slice(&(h.body.len() as u32).to_le_bytes());
    b.extend_from_slice(&h.body);
    assert!(codec::decode(CodecId::Bucket, &b, 8, 1 << 40).is_err());
    // A bad width is an error, not a panic.
    assert!(codec::decode(CodecId::Raw, &[], 0, 0).is_err());
    assert!(codec::decode(CodecId::Rans, &[], 65, 0).is_err());
}
