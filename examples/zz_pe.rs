use sixfold::{Pipeline, Pool};
fn main() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    for _ in 0..3 {
        let n = 200_000u64;
        let mut next = 0u64;
        let mut acc = 0u64;
        let mut p = Pipeline::new(|| {
            (next < n).then(|| {
                next += 1;
                next - 1
            })
        })
        .parallel(|x: u64| std::hint::black_box(x))
        .serial_in_order(|x| acc = acc.wrapping_mul(31).wrapping_add(x));
        pool.run_pipeline(&mut p, 8).unwrap();
        drop(p);
        std::hint::black_box(acc);
    }
}
