//! The program language (DESIGN §3, §5): operators and type rules, execution, the wire
//! format and the text form.

pub mod exec;
pub mod fused;
pub mod narrow;
pub mod parse;
pub mod program;
pub mod text;
pub mod wire;

pub use exec::{execute, execute_in, matches, ExecError};
pub use program::{Dequant, Lit, MapFn, MergeFn, Node, Op, ScanFn, Ty, TypeError};
pub use wire::{
    program_bytes, program_end, program_len, read_program, read_program_shared, size_report,
    wire_version_of, NodeSize, WireError,
};
