use super::*;

#[test]
fn float_bits_are_named() {
    let bf16 = [1, 8, 7];
    assert_eq!(float_bits_role(bf16, 16, 15), "the sign");
    assert_eq!(
        float_bits_role(bf16, 15, 4),
        "the exponent and the top 3 mantissa bits"
    );
    assert_eq!(float_bits_role(bf16, 4, 0), "the low 4 mantissa bits");
    assert_eq!(float_bits_role(bf16, 16, 7), "the sign and the exponent");
    assert_eq!(
        float_bits_role(bf16, 16, 5),
        "the sign, the exponent and the top 2 mantissa bits"
    );
    assert_eq!(float_bits_role(bf16, 7, 0), "the mantissa");
}

/// A real BF16 matrix stored as four regions (a root `Concat` of `merge fields`, as
/// `compress` stores tensors over a region): each region's streams are named as
/// the float's bits of that region, and the Why view sums each stream over the
/// regions instead of calling one region's literal "most of the bytes".
#[test]
fn why_sums_a_stream_over_the_regions_of_a_large_tensor() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.safetensors");
    let bytes = std::fs::read(path).unwrap();
    let src = crate::archive::safetensors::parse(&bytes).unwrap();
    let name = "encoder.layer.0.intermediate.dense.weight";
    let t = src.tensors().iter().position(|t| t.name == name).unwrap();
    let words = Words::from_le_bytes(16, src.tensor_bytes(t)).unwrap();
    // Searched (budget 2: at the default budget 1 these ordinary weights take the
    // fixed layout, whose mantissa split may differ from region to region).
    let opts = crate::synth::SearchOptions {
        budget: 2,
        ..crate::synth::SearchOptions::default()
    };
    let prior = crate::synth::Prior::uniform();
    let regions = words.len().div_ceil(4);
    let s = crate::synth::synthesize_in_regions(
        &words,
        Some(Dtype::BF16),
        None,
        &opts,
        &prior,
        regions,
    );
    let ins = inspect(t, Dtype::BF16, s.program, None, &|| false)
        .unwrap()
        .unwrap();
    let leaves: Vec<&str> = ins
        .nodes
        .iter()
        .filter(|n| n.children == 0)
        .map(|n| n.role.as_str())
        .collect();
    assert_eq!(
        leaves,
        (1..=4)
            .flat_map(|j| {
                [
                    "the sign",
                    "the exponent and the top 3 mantissa bits",
                    "the low 4 mantissa bits",
                ]
                .map(|r| format!("{r} of part {j} of 4 of the tensor"))
            })
            .collect::<Vec<_>>()
    );
    let first = &ins.why.sentences[0];
    assert!(
        first.starts_with(
            "most of the bytes are in the exponent and the top 3 mantissa bits, over 4 \
                 regions: "
        ),
        "{first}"
    );
    assert_eq!(
        role_across_regions("the sign of part 2 of 4 of the tensor"),
        "the sign"
    );
    assert_eq!(role_across_regions("the sign"), "the sign");
    assert_eq!(region_of("part 2 of 4 of the tensor"), Some("2"));
    assert_eq!(region_of("part two of 4 of the tensor"), None);
}

#[test]
fn thousands_groups_digits() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(45_442_208), "45,442,208");
}
