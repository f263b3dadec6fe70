//! A `.safetensors` file built from tensors: a fixture for the test crates (through
//! `support`) and `examples/finetunes.rs` (included with `#[path]`).

/// A `.safetensors` file of `(name, dtype, shape, bytes)` tensors, in that order, its
/// header padded with spaces to a multiple of 8 bytes.
pub fn safetensors_bytes<N: AsRef<str>>(tensors: &[(N, &str, Vec<u64>, Vec<u8>)]) -> Vec<u8> {
    let mut header = String::from("{");
    let mut at = 0;
    for (k, (name, dtype, shape, bytes)) in tensors.iter().enumerate() {
        if k > 0 {
            header.push(',');
        }
        let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
        header.push_str(&format!(
            r#""{}":{{"dtype":"{dtype}","shape":[{}],"data_offsets":[{at},{}]}}"#,
            name.as_ref(),
            shape.join(","),
            at + bytes.len()
        ));
        at += bytes.len();
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    for (_, _, _, bytes) in tensors {
        v.extend_from_slice(bytes);
    }
    v
}
