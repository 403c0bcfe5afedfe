//! loom model: the two entries of a mailbox proxy taken at once.
//!
//! A task with affinity sits in its worker's mailbox and in a second queue
//! (`proxy.rs`); two workers may take the two entries at the same moment.
//! In every interleaving exactly one of them claims the task, and the proxy
//! is freed exactly once, after both entries were given up.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release --target-dir target/loom --test loom_proxy`
#![cfg(loom)]

use loom::thread;
use sixfold::loom_api::{loom_proxy_frees, loom_proxy_pair};

#[test]
fn two_takers_claim_once_and_free_once() {
    loom::model(|| {
        let frees_before = loom_proxy_frees();
        let (mailbox_entry, deque_entry) = loom_proxy_pair();
        let thief = thread::spawn(move || deque_entry.take());
        let owner = mailbox_entry.take();
        let thief = thief.join().unwrap();
        assert!(owner ^ thief, "claimed by owner {owner}, thief {thief}");
        assert_eq!(loom_proxy_frees(), frees_before + 1);
    });
}
