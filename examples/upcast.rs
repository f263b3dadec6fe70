//! Writes a copy of a `.safetensors` file with every F16 and BF16 tensor upcast exactly
//! to F32 (what a checkpoint saved in F32 after mixed-precision training holds; issue
//! 29): `cargo run --release --example upcast IN OUT`. Other tensors are copied as
//! they are, in the order of their data, with the input's `__metadata__`.

use safetensors::{Dtype, SafeTensors};

/// An IEEE binary16 as the `f32` of the same value (NaNs keep sign and payload).
fn f16_bits_to_f32(h: u16) -> u32 {
    let sign = u32::from(h & 0x8000) << 16;
    let (e, m) = (u32::from((h >> 10) & 0x1f), u32::from(h & 0x3ff));
    match e {
        0 if m == 0 => sign,
        0 => {
            let shift = m.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | (((m << shift) & 0x3ff) << 13)
        }
        31 => sign | 0x7F80_0000 | (m << 13),
        _ => sign | ((e + 112) << 23) | (m << 13),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (input, output) = (&args[1], &args[2]);
    let bytes = std::fs::read(input).expect("read the input");
    let st = SafeTensors::deserialize(&bytes).expect("a safetensors file");
    let (_, meta) = SafeTensors::read_metadata(&bytes).expect("its header");
    let mut tensors: Vec<_> = st.tensors();
    let offset = |name: &str| meta.info(name).map_or(0, |i| i.data_offsets.0);
    tensors.sort_by_key(|(name, _)| offset(name));
    let mut header = serde_json::Map::new();
    if let Some(m) = meta.metadata() {
        header.insert("__metadata__".into(), serde_json::to_value(m).unwrap());
    }
    let mut data = Vec::new();
    for (name, view) in &tensors {
        let (dtype, body): (&str, Vec<u8>) = match view.dtype() {
            Dtype::F16 => (
                "F32",
                view.data()
                    .chunks_exact(2)
                    .flat_map(|b| f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]])).to_le_bytes())
                    .collect(),
            ),
            Dtype::BF16 => (
                "F32",
                view.data()
                    .chunks_exact(2)
                    .flat_map(|b| (u32::from(u16::from_le_bytes([b[0], b[1]])) << 16).to_le_bytes())
                    .collect(),
            ),
            other => (dtype_name(other), view.data().to_vec()),
        };
        let at = data.len();
        data.extend_from_slice(&body);
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": view.shape(), "data_offsets": [at, data.len()]}),
        );
    }
    let mut h = serde_json::to_string(&header).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(&data);
    std::fs::write(output, out).expect("write the output");
}

fn dtype_name(d: Dtype) -> &'static str {
    match d {
        Dtype::BOOL => "BOOL",
        Dtype::U8 => "U8",
        Dtype::I8 => "I8",
        Dtype::F8_E4M3 => "F8_E4M3",
        Dtype::F8_E5M2 => "F8_E5M2",
        Dtype::I16 => "I16",
        Dtype::U16 => "U16",
        Dtype::I32 => "I32",
        Dtype::U32 => "U32",
        Dtype::F32 => "F32",
        Dtype::F64 => "F64",
        Dtype::I64 => "I64",
        Dtype::U64 => "U64",
        other => panic!("dtype {other:?} not copied"),
    }
}
