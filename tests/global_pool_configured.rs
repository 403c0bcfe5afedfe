//! `Builder::build_global` configures the global pool once, before first
//! use; the free functions then run there. (A process of its own: the
//! global pool lives once per process.)

use sixfold::{BuildError, Pool};
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn build_global_configures_the_pool_the_free_functions_use() {
    Pool::builder()
        .num_threads(3)
        .thread_name(|i| format!("global-{i}"))
        .build_global()
        .expect("first configuration");
    assert_eq!(sixfold::current_num_threads(), 3);
    assert_eq!(Pool::global().num_threads(), 3);

    let name = || std::thread::current().name().unwrap_or("").to_owned();
    let (a, b) = sixfold::join(name, name);
    assert!(
        a.starts_with("global-") && b.starts_with("global-"),
        "{a} {b}"
    );

    let ran = AtomicBool::new(false);
    sixfold::scope(|s| {
        s.spawn(|_| ran.store(name().starts_with("global-"), Ordering::SeqCst));
    });
    assert!(ran.load(Ordering::SeqCst));

    // Once only.
    let err = Pool::builder().num_threads(2).build_global().unwrap_err();
    assert!(
        matches!(err, BuildError::GlobalPoolAlreadyInitialized),
        "{err}"
    );
    assert_eq!(sixfold::current_num_threads(), 3);
}
