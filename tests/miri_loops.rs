//! Small loops that walk every `unsafe` path of the loop module, sized to
//! run under Miri in CI (`cargo +nightly miri test --test miri_loops`):
//! the mutable sub-slices handed out from one base pointer, the placed
//! parts run as jobs from another worker's mailbox (or through a proxy),
//! their results written into cells and read after the call's latch, and
//! the recursive halves on the deque. They run as ordinary tests too.

mod common;

use sixfold::{AffinityPartitioner, Partitioner};

fn partitioners(affinity: &mut AffinityPartitioner) -> [Partitioner<'_>; 4] {
    [
        Partitioner::Auto { min_grain: 1 },
        Partitioner::Simple { grain: 3 },
        Partitioner::Static,
        Partitioner::Affinity(affinity),
    ]
}

#[test]
fn chunks_of_a_mutable_slice_are_disjoint_under_every_partitioner() {
    let pool = common::pool(2);
    let mut affinity = AffinityPartitioner::new();
    for round in 0..2u32 {
        for partitioner in partitioners(&mut affinity) {
            // Items that own heap memory: a sub-slice aliasing another
            // would double-drop or leak under Miri.
            let mut v: Vec<String> = (0..24).map(|i| i.to_string()).collect();
            pool.for_chunks_mut_with(&mut v, partitioner, |chunk, offset| {
                for (i, s) in chunk.iter_mut().enumerate() {
                    *s = format!("{}-{round}", offset + i);
                }
            });
            assert!(
                v.iter()
                    .enumerate()
                    .all(|(i, s)| *s == format!("{i}-{round}"))
            );
        }
    }
}

#[test]
fn placed_parts_return_their_results_in_order() {
    let pool = common::pool(2);
    let mut affinity = AffinityPartitioner::new();
    for _ in 0..2 {
        for partitioner in partitioners(&mut affinity) {
            let joined = pool.reduce_with(
                0..10,
                partitioner,
                String::new(),
                |r, mut acc| {
                    for i in r {
                        acc.push(char::from(b'a' + i as u8));
                    }
                    acc
                },
                |a, b| a + &b,
            );
            assert_eq!(joined, "abcdefghij");
        }
    }
}

#[test]
fn a_panicking_part_is_resumed_after_the_others() {
    common::quiet_intentional_panics("part panics on purpose");
    let pool = common::pool(2);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.for_range_with(0..8, Partitioner::Static, |r| {
            if r.start == 0 {
                panic!("part panics on purpose");
            }
        })
    }));
    assert!(result.is_err());
    assert_eq!(pool.reduce(0..8, 0, |r, a| a + r.len(), |a, b| a + b), 8);
}
