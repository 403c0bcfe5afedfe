//! Loom models of the pipeline's serial-stage gates (`src/pipeline/gate.rs`):
//! an item arriving while the holder leaves is taken exactly once, by the
//! arriver or by the leaving holder, never by both and never by neither;
//! and a gate never has two holders.
//!
//! Run: `LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" cargo test --release
//! --target-dir target/loom --test loom_gate`.

#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use sixfold::loom_api::{LoomAnyOrderGate, LoomArrival, LoomInOrderGate};

#[test]
fn in_order_next_item_is_taken_exactly_once_by_arriver_or_leaver() {
    loom::model(|| {
        let gate = Arc::new(LoomInOrderGate::new(2));
        // Item 0 (slot 0) holds the gate.
        assert_eq!(gate.arrive(0, 0), LoomArrival::Enter);
        let taken = Arc::new(AtomicUsize::new(0));
        let arriver = {
            let (gate, taken) = (gate.clone(), taken.clone());
            thread::spawn(move || {
                let a = gate.arrive(1, 1);
                if a == LoomArrival::Enter {
                    taken.fetch_add(1, Ordering::SeqCst);
                }
                a
            })
        };
        let f = gate.finish(0);
        if f == Some(1) {
            taken.fetch_add(1, Ordering::SeqCst);
        }
        let a = arriver.join().unwrap();
        assert_eq!(
            taken.load(Ordering::SeqCst),
            1,
            "item 1 stranded or taken twice: arrive {a:?}, finish {f:?}"
        );
    });
}

#[test]
fn in_order_item_waits_for_its_turn() {
    loom::model(|| {
        let gate = Arc::new(LoomInOrderGate::new(3));
        // Item 2 arrives before item 1: it must not enter before 1 left.
        let entered_early = Arc::new(AtomicBool::new(false));
        let one_done = Arc::new(AtomicBool::new(false));
        assert_eq!(gate.arrive(0, 0), LoomArrival::Enter);
        let late = {
            let (gate, entered_early, one_done) =
                (gate.clone(), entered_early.clone(), one_done.clone());
            thread::spawn(move || {
                if gate.arrive(2, 2) == LoomArrival::Enter && !one_done.load(Ordering::SeqCst) {
                    entered_early.store(true, Ordering::SeqCst);
                }
            })
        };
        // Item 0 leaves; item 1 arrives (it is next) and leaves.
        assert_eq!(gate.finish(0), None);
        assert_eq!(gate.arrive(1, 1), LoomArrival::Enter);
        one_done.store(true, Ordering::SeqCst);
        let handed = gate.finish(1);
        late.join().unwrap();
        assert!(!entered_early.load(Ordering::SeqCst));
        // Item 2 went in exactly once: by its own arrival, or handed over.
        // (If handed over, `handed` is its slot.)
        let _ = handed;
    });
}

/// Run a holder's round: "run" `slot` (checking nobody else is inside),
/// then leave and run whatever the gate hands over.
fn hold(gate: &LoomAnyOrderGate, inside: &AtomicBool, ran: &[AtomicUsize; 3], mut slot: u32) {
    loop {
        assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
        ran[slot as usize].fetch_add(1, Ordering::SeqCst);
        inside.store(false, Ordering::SeqCst);
        match gate.finish() {
            Some(next) => slot = next,
            None => return,
        }
    }
}

#[test]
fn any_order_runs_every_item_once_with_one_holder_at_a_time() {
    loom::model(|| {
        let gate = Arc::new(LoomAnyOrderGate::new(3));
        let inside = Arc::new(AtomicBool::new(false));
        let ran = Arc::new([
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        ]);
        assert_eq!(gate.arrive(0), LoomArrival::Enter);
        let arrivers: Vec<_> = [1u32, 2]
            .into_iter()
            .map(|slot| {
                let (gate, inside, ran) = (gate.clone(), inside.clone(), ran.clone());
                thread::spawn(move || match gate.arrive(slot) {
                    LoomArrival::Enter => hold(&gate, &inside, &ran, slot),
                    LoomArrival::Switch(other) => hold(&gate, &inside, &ran, other),
                    LoomArrival::Parked => {}
                })
            })
            .collect();
        hold(&gate, &inside, &ran, 0);
        for a in arrivers {
            a.join().unwrap();
        }
        for (slot, count) in ran.iter().enumerate() {
            assert_eq!(count.load(Ordering::SeqCst), 1, "slot {slot}");
        }
    });
}

/// Incarnations of slot 1 in `any_order_slot_parked_again_is_not_mistaken_for_the_arrivers_item`.
const INCARNATIONS: usize = 3;

/// Run the item now in `slot` (its incarnation `inc`) as the holder, and
/// every item the gate hands over after it. Slot 1's first incarnation,
/// once run, comes round again (its token fetched a new item) and arrives
/// at the gate while we still hold it.
fn hold_recycling(
    gate: &LoomAnyOrderGate,
    current: &[AtomicUsize; 3],
    ran: &[[AtomicUsize; INCARNATIONS]; 3],
    mut slot: u32,
) {
    loop {
        let inc = current[slot as usize].load(Ordering::SeqCst);
        ran[slot as usize][inc].fetch_add(1, Ordering::SeqCst);
        if slot == 1 && inc == 1 {
            current[1].store(2, Ordering::SeqCst);
            // We hold the gate: it parks.
            assert_eq!(gate.arrive(1), LoomArrival::Parked);
        }
        match gate.finish() {
            Some(next) => slot = next,
            None => return,
        }
    }
}

/// An arriver queues its slot and, before it announces it, the holder
/// takes that slot (counting another parked item's announcement), runs it,
/// and the slot's token comes back to the gate with a new item, while the
/// gate drains to free. The arriver then takes the gate and finds its own
/// slot index first in the queue: that is the new item, not the one the
/// arriver brought (which ran). Taking it for its own ran the old item
/// twice and lost the new one, and in the engine left the arriver's chain
/// broken: the items behind the slot were in no chain, no gate and no
/// queue, and the run hung.
#[test]
fn any_order_slot_parked_again_is_not_mistaken_for_the_arrivers_item() {
    loom::model(|| {
        let gate = Arc::new(LoomAnyOrderGate::new(3));
        let current = Arc::new([
            AtomicUsize::new(1),
            AtomicUsize::new(1),
            AtomicUsize::new(1),
        ]);
        let ran: Arc<[[AtomicUsize; INCARNATIONS]; 3]> = Arc::new(Default::default());
        assert_eq!(gate.arrive(0), LoomArrival::Enter);
        let arrivers: Vec<_> = [1u32, 2]
            .into_iter()
            .map(|slot| {
                let (gate, current, ran) = (gate.clone(), current.clone(), ran.clone());
                thread::spawn(move || {
                    let mine = current[slot as usize].load(Ordering::SeqCst);
                    match gate.arrive(slot) {
                        LoomArrival::Enter => {
                            // Our own item: the incarnation we brought.
                            ran[slot as usize][mine].fetch_add(1, Ordering::SeqCst);
                            if let Some(next) = gate.finish() {
                                hold_recycling(&gate, &current, &ran, next);
                            }
                        }
                        LoomArrival::Switch(other) => hold_recycling(&gate, &current, &ran, other),
                        LoomArrival::Parked => {}
                    }
                })
            })
            .collect();
        hold_recycling(&gate, &current, &ran, 0);
        for a in arrivers {
            a.join().unwrap();
        }
        let came_round = current[1].load(Ordering::SeqCst) == 2;
        for (slot, incs) in ran.iter().enumerate() {
            for (inc, count) in incs.iter().enumerate().skip(1) {
                let expected = usize::from(inc == 1 || (slot == 1 && inc == 2 && came_round));
                assert_eq!(
                    count.load(Ordering::SeqCst),
                    expected,
                    "slot {slot}, incarnation {inc}"
                );
            }
        }
    });
}
