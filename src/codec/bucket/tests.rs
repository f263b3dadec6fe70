use super::*;

/// The encoder before [`count`] and [`encode_counted`] (word by word, through
/// [`super::bitio::BitWriter`]): the bodies it wrote are the bodies written now.
fn encode_word_by_word(words: &Words, params: Params<'_>) -> Vec<u8> {
    let width = words.width();
    let n = words.len();
    let offsets = params
        .context
        .map(|(ctx, field)| context_field(ctx, field, n).expect("the context covers the words"));
    let mut symbols = Vec::with_capacity(n);
    let mut extra = crate::codec::bitio::BitWriter::new();
    for (i, v) in words.iter().enumerate() {
        let z = if params.zigzag {
            crate::tensor::zigzag(v, width)
        } else {
            v
        };
        let k = bits_needed(z);
        if k >= 2 {
            extra.write(z & mask(k - 1), k - 1);
        }
        let s = match &offsets {
            Some(o) if k > 0 => u64::from(k) + o.get(i),
            _ => u64::from(k),
        };
        symbols.push(s);
    }
    let max = symbols.iter().copied().max().unwrap_or(0);
    let sym_width = bits_needed(max).max(1);
    let symbols = Words::from_u64s(sym_width, &symbols);
    let inner = crate::codec::encode_best(&symbols);
    let mut out = Vec::new();
    let flags =
        u8::from(params.zigzag) * FLAG_ZIGZAG + u8::from(params.context.is_some()) * FLAG_CONTEXT;
    out.push(flags);
    if let Some((_, field)) = params.context {
        out.push(field.shift as u8);
        out.push(field.width as u8);
    }
    out.push(sym_width as u8);
    out.push(inner.codec as u8);
    let len = u32::try_from(inner.body.len()).expect("a literal's symbols fit in 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&inner.body);
    out.extend_from_slice(&extra.finish());
    out
}

/// Streams that exercise every path: widths 1..=64 (a 64-bit one with buckets over
/// 57 bits), small and large values, runs of zeros, lengths around a block.
fn streams() -> Vec<Words> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut out = Vec::new();
    for (width, n) in [
        (16, 3 * BLOCK + 17),
        (32, 2 * BLOCK),
        (8, 700),
        (64, 900),
        (1, 50),
        (12, 1),
        (58, 600),
        (16, 0),
    ] {
        let words = Words::from_fn(width, n, |i| {
            let r = next();
            match i % 7 {
                0 => 0,
                1 => r & 3,
                2 => r >> (r % 64),
                3 => (r & 15).wrapping_neg(),
                _ => r & 0x3ff,
            }
        });
        out.push(words);
    }
    out
}

/// F32-like context words for `n` words, exponents 100..=131.
fn context_for(n: usize) -> Words {
    Words::from_fn(32, n + 5, |i| {
        ((100 + (i * 7) % 32) as u64) << 23 | (i as u64 * 977) & 0x7f_ffff
    })
}

/// [`context_for`] as BF16 words: exponents 100 to 131 over 7 mantissa bits.
fn context16_for(n: usize) -> Words {
    Words::from_fn(16, n + 5, |i| {
        ((100 + (i * 7) % 32) as u64) << 7 | (i as u64 * 977) & 0x7f
    })
}

#[test]
fn the_counted_encoder_writes_the_word_by_word_bodies() {
    let field = Field {
        shift: 23,
        width: 8,
    };
    for words in streams() {
        let ctx_words = context_for(words.len());
        let ctx = Context {
            words: &ctx_words,
            start: 5,
        };
        for zigzag in [false, true] {
            for with_ctx in [false, true] {
                let params = Params {
                    zigzag,
                    context: with_ctx.then_some((ctx, field)),
                };
                let want = encode_word_by_word(&words, params);
                assert_eq!(
                    encode(&words, params),
                    want,
                    "{words:?} zigzag {zigzag} ctx {with_ctx}"
                );
                // Counted against the context, written with or without it.
                let counts = count(&words, zigzag, Some((ctx, field)));
                assert_eq!(encode_counted(&words, params, &counts), want);
                let bound = counts.bound_len(with_ctx).unwrap();
                assert!(
                    bound <= want.len() as u64,
                    "bound {bound} over {}",
                    want.len()
                );
            }
        }
    }
}

/// Every build of the block decoder gives the reference decoder's words, or gives up
/// exactly where it refuses: on the streams above, on every cut and on byte flips,
/// with F32-like context words and with BF16-like ones (16 bits: the AVX2 steps take
/// the 16-bit streams with their context).
#[test]
fn the_block_decoder_agrees_with_the_reference() {
    let f32_field = Field {
        shift: 23,
        width: 8,
    };
    let bf16_field = Field { shift: 7, width: 8 };
    for (words, bf16) in streams()
        .into_iter()
        .flat_map(|w| [(w.clone(), false), (w, true)])
    {
        let (width, n) = (words.width(), words.len());
        let (ctx_words, field) = if bf16 {
            (context16_for(n), bf16_field)
        } else {
            (context_for(n), f32_field)
        };
        let ctx = Context {
            words: &ctx_words,
            start: 5,
        };
        for zigzag in [false, true] {
            for with_ctx in [false, true] {
                let params = Params {
                    zigzag,
                    context: with_ctx.then_some((ctx, field)),
                };
                let body = encode(&words, params);
                let mut bodies = vec![body.clone()];
                bodies.extend((0..body.len()).step_by(3).map(|c| body[..c].to_vec()));
                for at in (0..body.len()).step_by(5) {
                    let mut bad = body.clone();
                    bad[at] ^= 1 << (at % 8);
                    bodies.push(bad);
                }
                let mut longer = body.clone();
                longer.push(0);
                bodies.push(longer);
                for b in &bodies {
                    for c in [Some(ctx), None] {
                        let want = decode_reference(b, width, n, c);
                        for build in [Build::Portable, Build::Avx2, Build::Best] {
                            let got = decode_blocks(b, width, n, c, build);
                            assert_eq!(got.as_ref(), want.as_ref().ok(), "{build:?}");
                        }
                        assert_eq!(decode(b, width, n, c), want);
                    }
                }
                assert_eq!(decode(&body, width, n, Some(ctx)).unwrap(), words);
            }
        }
    }
}

/// A residual decoded and combined with its base in one pass gives the base's words
/// combined with the reference decoder's, for both ops and every byte width; a damaged
/// body gives the reference decoder's error and leaves the output as it was.
#[test]
fn decode_combined_is_the_reference_decode_combined() {
    use crate::archive::format::RefOp;
    for width in [8u32, 16, 32, 64] {
        let n = 2 * BLOCK + 33;
        let base = Words::from_fn(width, n, |i| ((i as u64 * 0x9e37_79b9) >> 3) & mask(width));
        let mut base_le = Vec::new();
        base.write_le_bytes(&mut base_le);
        let residual = Words::from_fn(width, n, |i| match i % 5 {
            0 => 0,
            1 => 1,
            2 => (i as u64).wrapping_neg() & mask(width),
            _ => i as u64 & 0xff,
        });
        let field = (width >= 16).then_some(Field {
            shift: width / 2,
            width: 4,
        });
        let ctx = Context {
            words: &base,
            start: 0,
        };
        for (zigzag, op, rop) in [
            (false, Combine::Xor, RefOp::Xor),
            (true, Combine::Add, RefOp::Sub),
        ] {
            for f in [None, field] {
                let params = Params {
                    zigzag,
                    context: f.map(|f| (ctx, f)),
                };
                let body = encode(&residual, params);
                let mut want = Vec::new();
                residual.write_le_bytes(&mut want);
                crate::archive::base::combine(&mut want, &base_le, rop, container_bytes(width));
                for build in [Build::Portable, Build::Avx2, Build::Best] {
                    let mut out = vec![7u8];
                    combined_blocks(&body, width, n, &base_le, op, &mut out, build).unwrap();
                    assert_eq!(out[1..], want[..], "width {width} {build:?}");
                }
                let mut out = Vec::new();
                decode_combined(&body, width, n, &base_le, op, &mut out).unwrap();
                assert_eq!(out, want);
                let mut bad = body.clone();
                bad.push(0);
                let mut out = vec![1u8, 2];
                let e = decode_combined(&bad, width, n, &base_le, op, &mut out).unwrap_err();
                assert_eq!(Err(e), decode_reference(&bad, width, n, Some(ctx)));
                assert_eq!(out, [1, 2]);
            }
        }
    }
}

fn ctx_words() -> Words {
    // F32-like context words with exponents 120..=127.
    Words::from_u64s(
        32,
        &(0..64u64).map(|i| (120 + i % 8) << 23).collect::<Vec<_>>(),
    )
}

#[test]
fn a_worked_example_has_its_exact_body() {
    // Words 0, 1, 5 (bucket 3, extra bits 01), 2 (bucket 2, extra bit 0).
    let words = Words::from_u64s(8, &[0, 1, 5, 2]);
    let body = encode(
        &words,
        Params {
            zigzag: false,
            context: None,
        },
    );
    // flags 0, symbol width 2, the symbols 0 1 3 2 bit-packed (codec 1, a body of 2
    // bytes: 2 bits per word, then 0b10_11_01_00), extra bits 01 then 0 -> 0b001.
    assert_eq!(body, vec![0, 2, 1, 2, 0, 0, 0, 2, 0b1011_0100, 0b001]);
    assert_eq!(decode(&body, 8, 4, None).unwrap(), words);
}

#[test]
fn zigzag_and_context_round_trip() {
    let ctx = ctx_words();
    let field = Field {
        shift: 23,
        width: 8,
    };
    let vals: Vec<u64> = (0..48u64)
        .map(|i| ((i as i64 - 24) * 37) as u64 & 0xffff_ffff)
        .collect();
    let words = Words::from_u64s(32, &vals);
    for zigzag in [false, true] {
        for with_ctx in [false, true] {
            let c = Context {
                words: &ctx,
                start: 16,
            };
            let params = Params {
                zigzag,
                context: with_ctx.then_some((c, field)),
            };
            let body = encode(&words, params);
            assert_eq!(decode(&body, 32, 48, Some(c)).unwrap(), words);
            if with_ctx {
                let e = decode(&body, 32, 48, None).unwrap_err();
                assert!(e.to_string().contains("base tensor"), "{e}");
                // A context too short for the words.
                let short = Context {
                    words: &ctx,
                    start: 17,
                };
                assert!(matches!(
                    decode(&body, 32, 48, Some(short)),
                    Err(CodecError::Invalid { .. })
                ));
            }
        }
    }
}

#[test]
fn every_truncation_and_trailing_byte_is_an_error() {
    let words = Words::from_u64s(16, &[3, 900, 0, 65535, 7, 7, 7, 1]);
    let body = encode(
        &words,
        Params {
            zigzag: true,
            context: None,
        },
    );
    for cut in 0..body.len() {
        assert!(decode(&body[..cut], 16, 8, None).is_err(), "cut {cut}");
    }
    let mut long = body.clone();
    long.push(0);
    assert!(matches!(
        decode(&long, 16, 8, None),
        Err(CodecError::TrailingBytes { .. })
    ));
    let mut flags = body;
    flags[0] |= 0x80;
    assert!(matches!(
        decode(&flags, 16, 8, None),
        Err(CodecError::Invalid { .. })
    ));
}
