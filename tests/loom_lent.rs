//! loom model: a worker's lent work (`queues/lent.rs`), offered around a
//! stage body and withdrawn after it, while a thief looks twice and takes.
//!
//! In every interleaving exactly one side ends up with the offer, the
//! thief that takes it reads what the owner wrote before offering, and the
//! owner's use of the offered memory after a successful withdraw never
//! races with the thief (loom's cell checks that).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release --target-dir target/loom --test loom_lent`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use sixfold::loom_api::LoomLent;
use std::cell::Cell;

/// A thief that looks at the slot twice (it takes only an offer it saw
/// before) and, if it takes the offer, checks the value it reads there.
fn spawn_thief(
    slot: &Arc<LoomLent>,
    item: &Arc<UnsafeCell<u32>>,
    expected: fn(u32) -> bool,
) -> thread::JoinHandle<bool> {
    let (slot, item) = (slot.clone(), item.clone());
    thread::spawn(move || {
        let seen = Cell::new(u64::MAX);
        for _ in 0..2 {
            if let Some(taken) = slot.take_if_stale(&seen) {
                assert!(std::ptr::eq(taken.as_ptr(), &*item));
                // SAFETY: taking the offer made the cell ours.
                let value = unsafe { taken.as_ref() }.with(|v| unsafe { *v });
                assert!(
                    expected(value),
                    "the thief read {value}: a race with the owner"
                );
                return true;
            }
        }
        false
    })
}

/// One offer; the thief looks twice (it takes only an offer it saw before).
#[test]
fn owner_or_thief_gets_the_offer_never_both() {
    loom::model(|| {
        let slot = Arc::new(LoomLent::new());
        let item = Arc::new(UnsafeCell::new(0u32));
        let thief = spawn_thief(&slot, &item, |value| value == 7);
        item.with_mut(|v| unsafe { *v = 7 });
        // SAFETY: we own the slot; the cell outlives the offer.
        assert!(unsafe { slot.offer(&item) });
        // SAFETY: after our accepted offer.
        let back = unsafe { slot.withdraw() };
        if back {
            // Ours again: reuse the cell, as the next item's offer does.
            item.with_mut(|v| unsafe { *v = 8 });
        }
        let taken = thief.join().unwrap();
        assert!(back ^ taken, "withdrawn {back}, taken {taken}");
    });
}

/// Two offers in a row (two light items): the thief may take either, or
/// none, but never one the owner has withdrawn.
#[test]
fn a_later_offer_is_taken_whole_or_not_at_all() {
    loom::model(|| {
        let slot = Arc::new(LoomLent::new());
        let item = Arc::new(UnsafeCell::new(0u32));
        let thief = spawn_thief(&slot, &item, |value| value == 1 || value == 2);
        let mut withdrawn = 0;
        for round in 1..=2 {
            item.with_mut(|v| unsafe { *v = round });
            // SAFETY: owner; the cell outlives the offer.
            assert!(unsafe { slot.offer(&item) });
            // SAFETY: after our accepted offer.
            if unsafe { slot.withdraw() } {
                withdrawn += 1;
            } else {
                // Taken: the cell is the thief's; we stop offering it.
                break;
            }
        }
        let taken = thief.join().unwrap();
        // Taken: the owner found one offer gone and stopped there; not
        // taken: it got both back.
        if taken {
            assert!(withdrawn < 2, "withdrawn twice, yet taken");
        } else {
            assert_eq!(withdrawn, 2, "neither withdrawn nor taken");
        }
    });
}
