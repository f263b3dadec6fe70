//! Replaying a program found for one region of a tensor on another region of it: the
//! same operators, with the decomposition of each applied to the new words, and each
//! literal coded afresh by the smallest codec ([`Node::lit`]). What `compress` does at
//! the default level for the regions of a large tensor after its first: the regions of
//! one embedding or projection share their statistics' shape (the field split that
//! pays on one pays on the next), and a replay costs the literals' coding only, not the
//! search's sizing of every candidate. The program restores the new region exactly
//! whenever it is returned (each operator's decomposition is exact).

use crate::dsl::{Node, Op, Ty};
use crate::synth::decompose::{lazy_children, Shell};
use crate::tensor::Words;

/// `program`'s operators applied to `target`: `None` where one of them cannot be
/// replayed (only literals, constants, maps, scans and field, bit-plane and byte-plane
/// merges are; back references, concatenations, repeats, transposes and
/// dequantization follow their own region's words), or `target` is not of
/// `program`'s width or is empty.
pub fn replay(program: &Node, target: &Words) -> Option<Node> {
    if program.ty().width != target.width() || target.is_empty() {
        return None;
    }
    let ty = Ty::new(target.width(), target.len() as u64);
    match program.op() {
        Op::Lit(_) => Some(Node::lit(target)),
        Op::Const(v) => {
            if (0..target.len()).all(|i| target.get(i) == *v) {
                Node::constant(ty, *v).ok()
            } else {
                Some(Node::lit(target))
            }
        }
        Op::Map(f, child) => replay_shell(&Shell::Map(*f), std::slice::from_ref(child), target),
        Op::Scan(f, _, child) => replay_shell(
            &Shell::Scan(*f, target.get(0)),
            std::slice::from_ref(child),
            target,
        ),
        Op::Merge(f, children) => replay_shell(&Shell::Merge(f.clone()), children, target),
        _ => None,
    }
}

/// The node of `shell` whose children replay `children` on the child targets `shell`
/// gives `target`.
fn replay_shell(shell: &Shell, children: &[Node], target: &Words) -> Option<Node> {
    if matches!(shell, Shell::Scan(..)) && target.len() < 2 {
        return None;
    }
    let kids = lazy_children(shell, target);
    if kids.len() != children.len() {
        return None;
    }
    let nodes = children
        .iter()
        .zip(&kids)
        .map(|(c, k)| replay(c, k))
        .collect::<Option<Vec<Node>>>()?;
    shell.build(nodes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::{execute, MapFn, MergeFn, ScanFn};

    /// BF16-like words: a sign, an exponent near 0x7E and a noisy mantissa.
    fn weights(seed: u64, n: usize) -> Words {
        Words::from_fn(16, n, |i| {
            let h = (i as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            (h & 0x8000) | (0x3C00 + (h % 5) * 0x80) | (h >> 7 & 0x7F)
        })
    }

    /// A merge of a map, a scan, a constant and a literal replays on other words as the
    /// same tree, every literal coded afresh, and restores them exactly.
    #[test]
    fn a_program_replays_on_another_region_and_restores_it() {
        let a = weights(1, 5000);
        let fields = crate::dsl::exec::split_fields(&a, &[1, 8, 7]);
        let sign = Node::map(MapFn::Gray, Node::lit(&fields[0])).unwrap();
        let exp = Node::scan(
            ScanFn::Xor,
            fields[1].get(0),
            Node::lit(&crate::dsl::exec::unscan(ScanFn::Xor, &fields[1]).unwrap().1),
        )
        .unwrap();
        let low = Node::lit(&fields[2]);
        let program = Node::merge(MergeFn::Fields(vec![1, 8, 7]), vec![sign, exp, low]).unwrap();
        assert_eq!(execute(&program, u64::MAX).unwrap(), a);
        let b = weights(2, 3000);
        let again = replay(&program, &b).expect("maps, scans and merges replay");
        assert_eq!(execute(&again, u64::MAX).unwrap(), b);
        fn kinds(n: &Node, out: &mut Vec<&'static str>) {
            out.push(crate::synth::decompose::ProdKind::of(n).name());
            n.children().iter().for_each(|c| kinds(c, out));
        }
        let (mut was, mut now) = (Vec::new(), Vec::new());
        kinds(&program, &mut was);
        kinds(&again, &mut now);
        assert_eq!(now, was);
        assert_eq!(was.len(), 6, "merge, map, lit, scan, lit, lit: {was:?}");
    }

    /// A constant field stays a constant where the new words keep its value, and becomes
    /// a literal where they do not; operators that follow their own words are refused.
    #[test]
    fn constants_are_checked_and_other_operators_refused() {
        let a = Words::from_fn(16, 100, |i| 0x4000 | (i as u64 % 7));
        let program = Node::merge(
            MergeFn::Fields(vec![8, 8]),
            vec![
                Node::constant(Ty::new(8, 100), 0x40).unwrap(),
                Node::lit(&Words::from_fn(8, 100, |i| i as u64 % 7)),
            ],
        )
        .unwrap();
        assert_eq!(execute(&program, u64::MAX).unwrap(), a);
        let same_top = Words::from_fn(16, 64, |i| 0x4000 | (i as u64 % 3));
        let r = replay(&program, &same_top).unwrap();
        assert!(matches!(r.children()[0].op(), Op::Const(0x40)));
        let other_top = Words::from_fn(16, 64, |i| (i as u64 % 3) << 8);
        let r = replay(&program, &other_top).unwrap();
        assert!(matches!(r.children()[0].op(), Op::Lit(_)));
        assert_eq!(execute(&r, u64::MAX).unwrap(), other_top);
        let concat = Node::concat(vec![Node::lit(&a), Node::lit(&a)]).unwrap();
        assert!(replay(&concat, &a).is_none());
        assert!(replay(&program, &Words::from_fn(32, 10, |i| i as u64)).is_none());
    }
}
